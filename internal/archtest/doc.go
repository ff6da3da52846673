// Package archtest checks that ARCHITECTURE.md stays true of the code:
// the import rules between packages (TestLayering), the package diagram
// and table (TestPackageTable), the scheduler's loop table
// (TestSchedulerLoopTable), the routes README.md and ARCHITECTURE.md name
// (TestDocumentedRoutesExist) and the one connection-string parser
// (TestOneConnectionStringParser); and that the code keeps the house
// rules: no hand-written function over 80 lines or file over 400 without
// a stated reason (TestSizeLimits), and a doc comment on every exported
// identifier of the importable packages (TestExportedIdentifiersDocumented).
// Each failure says what to fix. It has no code outside tests.
package archtest
