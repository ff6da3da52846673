package db

// Statements the external tests inspect.
const (
	ClaimLimitedSQL     = claimLimitedSQL
	ClaimLimitedLockSQL = claimLimitedLockSQL
)
