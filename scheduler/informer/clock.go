package informer

import (
	"context"
	"time"

	"sharing-affinity/kswe-harness/dramodule"
)

// Now implements dramodule.Backend: the scheduler's wall clock in Unix seconds.
func (b *Backend) Now() int64 { return time.Now().Unix() }

// Wait implements dramodule.Backend (PreBind's wait for binding conditions,
// docs/kswe-dra-extension.md §2.5): sleeps for seconds, while the informers keep feeding the
// drivers' status updates, and answers Canceled when ctx ends first (the scheduler stops or the
// binding cycle is cancelled). It holds no lock while it sleeps.
func (b *Backend) Wait(ctx context.Context, seconds uint32) int32 {
	timer := time.NewTimer(time.Duration(seconds) * time.Second)
	defer timer.Stop()
	select {
	case <-timer.C:
		return dramodule.OK
	case <-ctx.Done():
		return dramodule.Canceled
	}
}
