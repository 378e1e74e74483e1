// Package tracing builds hookinbox's OpenTelemetry tracer provider, which
// exports with OTLP over HTTP, and carries a delivery's trace context
// through its River job.
//
// A delivery is traced from the receiver to the worker like this: the
// receiver's span of the request (the claim inside it) writes its W3C trace
// context ("traceparent", "tracestate") into the metadata of each job the
// delivery enqueued (see Carrier and Metadata); the worker's River
// middleware (otelriver) starts the job's span with a link to it, and the
// worker's span of the event's handlers is that span's child, with the
// same link. The context is written per delivery, not taken from the
// inserting context, because the receiver commits many deliveries in one
// group transaction: the group's context belongs to no one delivery.
//
// The Sampler follows that link: a job's span is sampled exactly when the
// delivery's was, so a delivery is traced end to end or not at all.
package tracing
