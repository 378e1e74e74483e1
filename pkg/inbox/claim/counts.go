// Package claim holds what the inbox's claim of one delivery committed, as
// the packages around the inbox see it: the inbox computes it, the receiver
// answers with it, and a provider's Acknowledger shapes its reply from it.
// It is a leaf package, so that pkg/provider can name the type without
// importing the inbox (and PostgreSQL and River with it).
package claim

// Counts is what the inbox committed for one delivery. Its JSON form is the
// receiver's 200 body: {"new":…,"duplicates":…,"twins":…}.
type Counts struct {
	// New counts the events claimed: rows inserted, jobs enqueued.
	New int `json:"new"`
	// Duplicates counts the events skipped because their (source, event id)
	// was taken.
	Duplicates int `json:"duplicates"`
	// Twins counts the events skipped because only their twin key was
	// taken: a second logical copy of an event under a new id.
	Twins int `json:"twins"`
}
