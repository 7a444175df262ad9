package eventlog

// DropReason is a reason of corral_core_events_dropped_total: why a member
// event did not reach the log. Its name is fixed here, so a call site
// cannot invent a label; docs/SECURITY.md's "Drop and refusal reasons"
// table has a row for each (TestReasonsHaveMetricsAndDocs).
type DropReason uint8

const (
	DropQueueFull DropReason = iota // the event log's queue was full
	DropClosed                      // the event log was closing
	numDropReasons
)

// DropReasonNames are the label values users see; renaming one breaks
// their dashboards.
var DropReasonNames = [numDropReasons]string{
	DropQueueFull: "queue_full",
	DropClosed:    "closed",
}

func (r DropReason) String() string { return DropReasonNames[r] }
