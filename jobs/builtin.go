package jobs

// Built-in job types.
const (
	TypeNoop        = "noop"
	TypeSleep       = "sleep"
	TypeFail        = "fail"
	TypeHTTPRequest = "http_request"
	TypeSendEmail   = "send_email"
)
