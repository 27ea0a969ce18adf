package informer

import "time"

// Now implements dramodule.Backend: the scheduler's wall clock in Unix seconds.
func (b *Backend) Now() int64 { return time.Now().Unix() }
