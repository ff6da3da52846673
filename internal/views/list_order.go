package views

import "github.com/flinthq/flint/internal/domain"

// ListOrder is one order a list offers: its value in ?sort=, its label and
// the listing it asks for.
type ListOrder struct {
	Value, Label string
	By           domain.SortKey
	Oldest       bool
}

var (
	jobsOrders = []ListOrder{
		{"", "Created, newest first", domain.SortCreated, false},
		{"oldest", "Created, oldest first", domain.SortCreated, true},
		{"started", "Started, latest first", domain.SortStarted, false},
		{"started_oldest", "Started, earliest first", domain.SortStarted, true},
		{"finished", "Finished, latest first", domain.SortFinished, false},
		{"finished_oldest", "Finished, earliest first", domain.SortFinished, true},
	}
	// The dead-letter queue is ordered by when its jobs failed: a job
	// created a week ago that failed a minute ago is news.
	dlqOrders = []ListOrder{
		{"", "Failed, latest first", domain.SortFinished, false},
		{"oldest", "Failed, earliest first", domain.SortFinished, true},
		{"created", "Created, newest first", domain.SortCreated, false},
		{"created_oldest", "Created, oldest first", domain.SortCreated, true},
	}
	binOrders = []ListOrder{{"", "Deleted, latest first", domain.SortCreated, false}}
)

// ListOrders are the orders a list kind offers, its default first.
func ListOrders(kind string) []ListOrder {
	switch kind {
	case "dlq":
		return dlqOrders
	case "bin":
		return binOrders
	}
	return jobsOrders
}

// OrderOf is the order value names on a list kind, and whether it is one.
func OrderOf(kind, value string) (ListOrder, bool) {
	for _, o := range ListOrders(kind) {
		if o.Value == value {
			return o, true
		}
	}
	return ListOrders(kind)[0], false
}

// orderValues lists a kind's order values, for an error message.
func orderValues(kind string) string {
	s := ""
	for _, o := range ListOrders(kind)[1:] {
		if s != "" {
			s += ", "
		}
		s += o.Value
	}
	return s
}

// OrderHelp says which orders a list kind takes, for an error message.
func OrderHelp(kind string) string {
	if len(ListOrders(kind)) == 1 {
		return "this list has one order; leave it out"
	}
	return "leave it out for the default order, or give one of " + orderValues(kind)
}

// beforeLabel names the jump to a time of a list, by its order's time.
func beforeLabel(l JobsList) string {
	o, _ := OrderOf(l.Kind, l.Filter.Sort)
	switch {
	case o.By == domain.SortFinished && l.Kind == "dlq":
		return "Jump to failed before (UTC)"
	case o.By == domain.SortFinished:
		return "Jump to finished before (UTC)"
	case o.By == domain.SortStarted:
		return "Jump to started before (UTC)"
	}
	return "Jump to created before (UTC)"
}

// liveOrder tells the live updates where a job that comes onto the first
// page goes: by id (creation order, newest first), or at the top (the
// dead-letter queue by failure, latest first: a job that just failed is
// the latest).
func liveOrder(l JobsList) string {
	if o, _ := OrderOf(l.Kind, l.Filter.Sort); o.By == domain.SortFinished && !o.Oldest {
		return "top"
	}
	return "id"
}
