// Package rejection keeps, per source, the last few deliveries the receiver
// refused (hookinbox_rejection): when, why, from which address, and the
// request's headers with every secret-bearing value redacted; never the
// body. It exists so that a failed secret rotation can be debugged from
// `inboxctl rejections SOURCE` without turning on debug logs.
//
// A Recorder is built so that a flood of unsigned requests cannot become a
// flood of writes: samples of one source are admitted by a token bucket
// (SampleBurst at once, then one per SampleEvery), only configured sources
// are recorded (a client cannot invent names), the hand-off to the writer
// is a bounded channel that drops when full, and each write trims the
// source to its last Keep rows. The table is only ever Keep rows per
// configured source, and the receiver writes at most one row per
// SampleEvery per source once the burst is spent.
package rejection
