package controller

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseLock is client-go's Lease lock, with two additions: its calls are
// reported to apiCalls, and a read that shows another replica holding the
// Lease while this one leads makes it stop leading at once.
//
// client-go notices the same only when its renew deadline passes
// (--leader-elect.renew-deadline, 10 s by default): after a frozen leader
// resumes, both replicas acted as leader for that long. Stopping at the
// first read cuts the overlap to the time until the resumed leader's next
// renewal (--leader-elect.retry-period); it cannot remove it, which is why
// every decision that is not idempotent is written with a precondition
// (see write.go).
type leaseLock struct {
	*resourcelock.LeaseLock
	calls *apiCalls
	// retrying says when client-go tries again, for the warnings.
	retrying string
	// otherHolder is called with the identity of another replica that
	// holds the Lease.
	otherHolder func(identity string)
}

var _ resourcelock.Interface = (*leaseLock)(nil)

func (l *leaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.LeaseLock.Get(ctx)
	switch {
	case err == nil:
		l.calls.ok(getLeases)
		// A released Lease has no holder: taking it is client-go's to try.
		if h := rec.HolderIdentity; h != "" && h != l.Identity() {
			l.otherHolder(h)
		}
	case apierrors.IsNotFound(err): // the first replica creates it
		l.calls.ok(getLeases)
	case ctx.Err() == nil:
		l.calls.failed(getLeases, err, l.retrying)
	}
	return rec, raw, err
}

func (l *leaseLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.LeaseLock.Create(ctx, rec)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err): // another replica was first
		l.calls.ok(createLeases)
	case ctx.Err() == nil:
		l.calls.failed(createLeases, err, l.retrying)
	}
	return err
}

func (l *leaseLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.LeaseLock.Update(ctx, rec)
	switch {
	case err == nil, apierrors.IsConflict(err): // another replica wrote it: client-go reads it again
		l.calls.ok(updateLeases)
	case ctx.Err() == nil:
		l.calls.failed(updateLeases, err, l.retrying)
	}
	return err
}
