package dramodule

import (
	"context"
	"reflect"
	"testing"

	"github.com/tetratelabs/wazero/api"
	corev1 "k8s.io/api/core/v1"
)

// waits is a Backend that records the waits it is asked for and answers answer.
type waits struct {
	seconds []uint32
	answer  int32
}

func (*waits) Changes(string) []byte                             { return []byte(`{"cursor":"","resync":true,"events":[]}`) }
func (*waits) SetPending(string, *corev1.Pod, []byte) int32      { return OK }
func (*waits) WriteAllocation(string, *corev1.Pod, []byte) int32 { return OK }
func (*waits) Deallocate(string, string, *corev1.Pod) int32      { return OK }
func (*waits) Now() int64                                        { return 0 }
func (w *waits) Wait(_ context.Context, seconds uint32) int32 {
	w.seconds = append(w.seconds, seconds)
	return w.answer
}

// wait answers 4 with no pod, 2 outside 1..=600, 5 when the call's context is already done (the
// backend is not asked in these cases) and otherwise what the backend's Wait answers (5 when the
// context ends during the wait).
func TestWaitChecksPodRangeAndContext(t *testing.T) {
	ctx := context.Background()
	backend := &waits{}
	h, err := New(ctx, backend)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	def, ok := h.Module().ExportedFunctionDefinitions()["wait"]
	if !ok {
		t.Fatal("the module exports no wait")
	}
	if params, results := def.ParamTypes(), def.ResultTypes(); len(params) != 1 || params[0] != api.ValueTypeI32 ||
		len(results) != 1 || results[0] != api.ValueTypeI32 {
		t.Fatalf("wait: %v -> %v, want (i32) -> i32", params, results)
	}
	fn := def.GoFunction().(api.GoModuleFunction)
	wait := func(ctx context.Context, seconds int32) int32 {
		stack := []uint64{api.EncodeI32(seconds)}
		fn.Call(ctx, nil, stack)
		return api.DecodeI32(stack[0])
	}
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "ns", "u1"
	withPod := WithPod(ctx, pod)
	cancelled, cancel := context.WithCancel(withPod)
	cancel()
	for _, c := range []struct {
		msg     string
		ctx     context.Context
		seconds int32
		want    int32
	}{
		{"no pod", ctx, 5, NoPod},
		{"no pod, out of range", ctx, 0, NoPod},
		{"zero seconds", withPod, 0, Invalid},
		{"negative", withPod, -5, Invalid},
		{"above the maximum", withPod, MaxWait + 1, Invalid},
		{"cancelled context", cancelled, 5, Canceled},
		{"one second", withPod, 1, OK},
		{"the maximum", withPod, MaxWait, OK},
	} {
		if got := wait(c.ctx, c.seconds); got != c.want {
			t.Errorf("%s: wait(%d) = %d, want %d", c.msg, c.seconds, got, c.want)
		}
	}
	backend.answer = Canceled
	if got := wait(withPod, 5); got != Canceled {
		t.Errorf("the backend's wait ended early: %d, want %d", got, Canceled)
	}
	if want := []uint32{1, MaxWait, 5}; !reflect.DeepEqual(backend.seconds, want) {
		t.Errorf("the backend was asked to wait %v, want %v", backend.seconds, want)
	}
}
