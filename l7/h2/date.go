package h2

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// dateValue is the Date header, formatted once a second.
var (
	dateValue atomic.Pointer[string]
	dateOnce  sync.Once
)

func currentDate() string {
	dateOnce.Do(func() {
		setDate()
		go func() {
			for range time.Tick(time.Second) {
				setDate()
			}
		}()
	})
	return *dateValue.Load()
}

func setDate() {
	v := time.Now().UTC().Format(http.TimeFormat)
	dateValue.Store(&v)
}
