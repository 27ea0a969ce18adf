package informer

import (
	"context"
	"testing"
	"time"

	"sharing-affinity/kswe-harness/dramodule"
)

// Wait sleeps for the seconds asked and answers Canceled as soon as the call's context ends.
func TestWaitSleepsUntilTheContextEnds(t *testing.T) {
	b := New(fakeClient())
	// wait is b.Wait, failing the test when it has not returned after a few seconds.
	wait := func(ctx context.Context, seconds uint32) int32 {
		t.Helper()
		done := make(chan int32, 1)
		go func() { done <- b.Wait(ctx, seconds) }()
		select {
		case r := <-done:
			return r
		case <-time.After(5 * time.Second):
			t.Fatalf("Wait(%d) has not returned after 5 s", seconds)
			return 0
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if r := wait(cancelled, dramodule.MaxWait); r != dramodule.Canceled {
		t.Fatalf("cancelled context: %d", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if r := wait(ctx, dramodule.MaxWait); r != dramodule.Canceled {
		t.Fatalf("context ending during the wait: %d", r)
	}
	start := time.Now()
	if r := wait(context.Background(), 1); r != dramodule.OK || time.Since(start) < time.Second {
		t.Fatalf("one second: %d after %v", r, time.Since(start))
	}
}
