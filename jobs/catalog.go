package jobs

// TypeSource says which job types an enqueue may name and which handler,
// if any, checks a type's payload here. *Registry is one (the types it
// has handlers for); *Catalog adds the types served elsewhere.
type TypeSource interface {
	// Lookup returns the handler for jobType in this process, if any.
	Lookup(jobType string) (Handler, bool)
	// Accepts reports whether a job of jobType may be enqueued into queue.
	Accepts(jobType, queue string) bool
	// Known lists the types Accepts accepts, sorted, for error messages
	// and forms.
	Known() []string
}

// Accepts reports whether r has a handler for jobType.
func (r *Registry) Accepts(jobType, _ string) bool {
	_, ok := r.Lookup(jobType)
	return ok
}

// Known returns the registered types, sorted.
func (r *Registry) Known() []string { return r.Types() }
