package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/effect"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// MirrorHandlerName is the name of the built-in mirror handler.
const MirrorHandlerName = "mirror"

// errNoMirrorSpec is returned by the mirror handler for an event whose route
// has no mirror spec and whose provider has no documented default.
var errNoMirrorSpec = errors.New("worker: no mirror spec")

// mirrorHandler keeps the latest snapshot of every object in
// hookinbox_snapshot through effect.Upsert's version guard: the route's
// Mirror spec, or the provider's documented default, says where each
// event's object kind, id and version are. A stale snapshot is no error: it
// is logged at debug level and the event is done. An event whose object
// cannot be located fails at once (retrying cannot fix its payload).
func mirrorHandler(logger *zap.Logger) Handler {
	return func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
		spec, err := mirrorSpec(ctx, ev.Provider)
		if err != nil {
			return inbox.Permanent(err)
		}
		snap, err := spec.Snapshot(&ev)
		if err != nil {
			return inbox.Permanent(fmt.Errorf("mirror: %w", err))
		}
		out, err := effect.Upsert(ctx, tx, snap, spec.Tie)
		if err != nil {
			return err
		}
		logger.Debug("mirrored", zap.Int64("inbox_id", ev.ID), zap.String("kind", snap.Kind),
			zap.String("object_id", snap.ObjectID), zap.Int64("version", snap.Version), zap.String("outcome", string(out)))
		return nil
	}
}

// mirrorSpec returns the running route's mirror spec, else the provider's
// default.
func mirrorSpec(ctx context.Context, provider string) (*effect.Spec, error) {
	if route, ok := RouteFrom(ctx); ok && route.Mirror != nil {
		return route.Mirror, nil
	}
	if spec, ok := effect.DefaultSpec(provider); ok {
		return &spec, nil
	}
	return nil, fmt.Errorf("%w for provider %q: set the route's mirror (kind, id, version)", errNoMirrorSpec, provider)
}
