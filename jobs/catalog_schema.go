package jobs

// SchemaSource is a TypeSource that may hold payload schemas (*Catalog):
// EnqueueParams.Validate checks a payload against its type's schema.
type SchemaSource interface {
	// Schema returns jobType's payload schema, or nil for none.
	Schema(jobType string) *PayloadSchema
}
