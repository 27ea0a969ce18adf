// Package dramodule is the sharing-affinity.dra/v1 host module on wazero
// (docs/kswe-dra-extension.md §2), and the import resolver that lets the unmodified KSWE plugin
// link a guest against it. The objects behind the module come from a Backend, which keeps them in
// a Feed (the change feed of §2.1): the harness's recorded store and the scheduler's informer
// backend (scheduler/informer) are the two.
//
// KSWE creates its own wazero runtime and instantiates only its own host modules. wazero (since
// v1.8) reads an experimental.ImportResolver from the context of every module instantiation and
// asks it first for each imported module name; KSWE passes the framework's context down to every
// guest instantiation. So the module lives in a runtime of ours, and every context given to the
// plugin carries the resolver.
package dramodule

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	corev1 "k8s.io/api/core/v1"
)

// Name is the import module name the guest uses.
const Name = "sharing-affinity.dra/v1"

// Results of allocation, pending_allocation, deallocation and wait (docs/kswe-dra-extension.md
// §2.2, §2.3, §2.5).
const (
	OK       int32 = 0
	NotFound int32 = 1
	Invalid  int32 = 2
	Conflict int32 = 3
	NoPod    int32 = 4
	// Canceled is wait's result when the call's context ended before the wait did.
	Canceled int32 = 5
)

// MaxWait is the longest wait, in seconds, that wait accepts (§2.5).
const MaxWait = 600

// Backend holds the objects the module serves and takes the guest's writes. Its methods are
// called from guest calls, possibly on several goroutines at once.
type Backend interface {
	// Changes returns the change-feed document after cursor (§2.1).
	Changes(cursor string) []byte
	// SetPending records a tentative allocation of claim (namespace/name) for pod (§2.2).
	SetPending(claim string, pod *corev1.Pod, allocation []byte) int32
	// WriteAllocation writes claim's status.allocation and reserves it for pod (§2.2).
	WriteAllocation(claim string, pod *corev1.Pod, allocation []byte) int32
	// Deallocate clears claim's status.allocation, status.reservedFor and status.devices if the
	// claim is still at resourceVersion version and no pod other than pod uses it (§2.3).
	Deallocate(claim, version string, pod *corev1.Pod) int32
	// Now is the backend's clock in Unix seconds (§2.4).
	Now() int64
	// Wait is PreBind's wait of seconds (1 to MaxWait) for binding conditions (§2.5): OK once
	// the time has passed, Canceled when ctx ends first. It must not hold a lock that the other
	// methods take while it waits. The module calls it only with a current pod in ctx.
	Wait(ctx context.Context, seconds uint32) int32
}

type podKey struct{}

// WithPod marks a framework callback in progress for a pod. The module needs the current pod for
// its writes; KSWE keeps its own per-call stack under an unexported context key, so the caller of
// the plugin adds the pod under this one.
func WithPod(ctx context.Context, pod *corev1.Pod) context.Context {
	return context.WithValue(ctx, podKey{}, pod)
}

// CurrentPod is the pod WithPod put in ctx, or nil.
func CurrentPod(ctx context.Context) *corev1.Pod {
	pod, _ := ctx.Value(podKey{}).(*corev1.Pod)
	return pod
}

// Host is the instantiated host module and the runtime that owns it.
type Host struct {
	runtime wazero.Runtime
	module  api.Module
}

// read copies guest memory; outside memory is a panic, which wazero turns into a trap (§2.1).
func read(m api.Module, fn, what string, ptr, length uint32) []byte {
	b, ok := m.Memory().Read(ptr, length)
	if !ok {
		panic(fmt.Sprintf("%s.%s: out of memory reading %s", Name, fn, what))
	}
	return append([]byte(nil), b...)
}

// New instantiates the module over a backend in a runtime of its own.
func New(ctx context.Context, s Backend) (*Host, error) {
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig())
	i32 := api.ValueTypeI32
	params := []api.ValueType{i32, i32, i32, i32}
	results := []api.ValueType{i32}
	changes := func(_ context.Context, m api.Module, stack []uint64) {
		cursor := read(m, "changes", "cursor", api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
		buf, limit := api.DecodeU32(stack[2]), api.DecodeU32(stack[3])
		doc := s.Changes(string(cursor))
		if uint64(len(doc)) <= uint64(limit) && !m.Memory().Write(buf, doc) {
			panic(Name + ".changes: out of memory writing changes")
		}
		stack[0] = api.EncodeU32(uint32(len(doc)))
	}
	writer := func(name string, pending bool) api.GoModuleFunc {
		return func(ctx context.Context, m api.Module, stack []uint64) {
			claim := read(m, name, "claim", api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
			alloc := read(m, name, "allocation", api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
			pod := CurrentPod(ctx)
			result := NoPod
			switch {
			case pod == nil:
			case pending:
				result = s.SetPending(string(claim), pod, alloc)
			default:
				result = s.WriteAllocation(string(claim), pod, alloc)
			}
			stack[0] = api.EncodeI32(result)
		}
	}
	deallocation := func(ctx context.Context, m api.Module, stack []uint64) {
		claim := read(m, "deallocation", "claim", api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
		version := read(m, "deallocation", "version", api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
		result := NoPod
		if pod := CurrentPod(ctx); pod != nil {
			result = s.Deallocate(string(claim), string(version), pod)
		}
		stack[0] = api.EncodeI32(result)
	}
	now := func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = api.EncodeI64(s.Now())
	}
	// wait checks the pod before the range, as the writers check it before their input; a
	// context already done ends the wait before it starts.
	wait := func(ctx context.Context, _ api.Module, stack []uint64) {
		seconds := api.DecodeI32(stack[0])
		var result int32
		switch {
		case CurrentPod(ctx) == nil:
			result = NoPod
		case seconds < 1 || seconds > MaxWait:
			result = Invalid
		case ctx.Err() != nil:
			result = Canceled
		default:
			result = s.Wait(ctx, uint32(seconds))
		}
		stack[0] = api.EncodeI32(result)
	}
	b := r.NewHostModuleBuilder(Name)
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(changes), params, results).
		WithParameterNames("cursor", "cursor_len", "buf", "buf_limit").Export("changes")
	b.NewFunctionBuilder().WithGoModuleFunction(writer("allocation", false), params, results).
		WithParameterNames("claim", "claim_len", "json", "json_len").Export("allocation")
	b.NewFunctionBuilder().WithGoModuleFunction(writer("pending_allocation", true), params, results).
		WithParameterNames("claim", "claim_len", "json", "json_len").Export("pending_allocation")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(deallocation), params, results).
		WithParameterNames("claim", "claim_len", "version", "version_len").Export("deallocation")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(now), nil, []api.ValueType{api.ValueTypeI64}).
		Export("now")
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(wait), []api.ValueType{i32}, results).
		WithParameterNames("seconds").Export("wait")
	// Compile and InstantiateModule rather than b.Instantiate: the builder wraps its instance in a
	// type that the import resolver cannot link (wazero v1.11 panics on it).
	compiled, err := b.Compile(ctx)
	var module api.Module
	if err == nil {
		module, err = r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(Name))
	}
	if err != nil {
		if cerr := r.Close(ctx); cerr != nil {
			return nil, fmt.Errorf("instantiating %s: %w (closing its runtime: %w)", Name, err, cerr)
		}
		return nil, fmt.Errorf("instantiating %s: %w", Name, err)
	}
	return &Host{runtime: r, module: module}, nil
}

// Resolve returns ctx with the import resolver that serves the module to every guest instance.
func (h *Host) Resolve(ctx context.Context) context.Context {
	return experimental.WithImportResolver(ctx, func(name string) api.Module {
		if name == Name {
			return h.module
		}
		return nil
	})
}

// Module is the instantiated host module.
func (h *Host) Module() api.Module { return h.module }

// Close closes the runtime that owns the module.
func (h *Host) Close(ctx context.Context) error { return h.runtime.Close(ctx) }
