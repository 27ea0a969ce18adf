package main

// What the guest logs. KSWE sends a guest's klog calls (the k8s.io/klog host module) to klog's
// global logger; the replay installs a sink there that keeps each entry as a line, and the
// objects the guest rejected (it logs "sharing-affinity: object rejected" with the object and
// the error): the report lists those in `rejected`, as `sharing-affinity replay` does.

import (
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// rejectedMessage is what the guest logs for an object it refuses.
const rejectedMessage = "sharing-affinity: object rejected"

// guestLog is a logr sink for klog's global logger. Safe for concurrent use.
type guestLog struct {
	mu       sync.Mutex
	lines    []string
	rejected []string
	seen     map[string]bool
}

func newGuestLog() *guestLog { return &guestLog{seen: map[string]bool{}} }

func (g *guestLog) Init(logr.RuntimeInfo) {}

func (g *guestLog) Enabled(int) bool { return true }

func (g *guestLog) Info(_ int, msg string, kvs ...any) { g.add("info", msg, kvs) }

func (g *guestLog) Error(_ error, msg string, kvs ...any) {
	g.add("error", msg, kvs)
	if msg != rejectedMessage {
		return
	}
	var object, reason string
	found := false
	for i := 0; i+1 < len(kvs); i += 2 {
		switch key, _ := kvs[i].(string); key {
		case "object":
			object = fmt.Sprint(kvs[i+1])
		case "error":
			reason, found = fmt.Sprint(kvs[i+1]), true
		}
	}
	if !found {
		return
	}
	if object == "" {
		object = reason
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// Every instance logs an object each time its feed carries it (a new instance resyncs):
	// listed once, with the first error the guest gave.
	if !g.seen[object] {
		g.seen[object] = true
		g.rejected = append(g.rejected, reason)
	}
}

func (g *guestLog) WithValues(...any) logr.LogSink { return g }

func (g *guestLog) WithName(string) logr.LogSink { return g }

// add keeps one entry as `severity: msg key=value ...`, the form the Rust KSWE host prints.
func (g *guestLog) add(severity, msg string, kvs []any) {
	var b strings.Builder
	b.WriteString(severity + ": " + msg)
	for i := 0; i+1 < len(kvs); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kvs[i], kvs[i+1])
	}
	g.mu.Lock()
	g.lines = append(g.lines, b.String())
	g.mu.Unlock()
}

// take returns and forgets the lines logged so far.
func (g *guestLog) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	lines := g.lines
	g.lines = nil
	return lines
}

// rejections returns the errors of the objects the guest rejected, each object once, in log order.
func (g *guestLog) rejections() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.rejected...)
}
