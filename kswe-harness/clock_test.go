package main

import (
	"context"
	"testing"

	"sharing-affinity/kswe-harness/dramodule"
)

// PreBind's wait advances the replay's clock (docs/kswe-dra-extension.md §2.5), and Now shows it.
func TestWaitAdvancesTheClock(t *testing.T) {
	s := newStore()
	s.clock = 1_000
	for _, seconds := range []uint32{5, dramodule.MaxWait} {
		if got := s.Wait(context.Background(), seconds); got != dramodule.OK {
			t.Fatalf("Wait(%d): %d", seconds, got)
		}
	}
	if got := s.Now(); got != 1_605 {
		t.Fatalf("Now after waiting 605 s: %d, want 1605", got)
	}
}
