package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigErrorsNameEverySetting: one error lists every bad setting, and
// a worker cannot be told to listen on a queue nothing can be enqueued to.
func TestConfigErrorsNameEverySetting(t *testing.T) {
	env := map[string]string{
		"FLINT_WORKERS": "0",
		"FLINT_QUEUES":  "mail,bad/queue,sp ace",
		"LOG_LEVEL":     "loud",
	}
	_, err := loadConfig("worker", nil, func(k string) string { return env[k] })
	require.Error(t, err)
	for _, want := range []string{"FLINT_WORKERS=0", `"bad/queue" is not a valid queue name`, `"sp ace" is not a valid queue name`, `LOG_LEVEL="loud"`} {
		require.Contains(t, err.Error(), want)
	}
	require.NotContains(t, err.Error(), `"mail"`)

	env = map[string]string{"FLINT_QUEUES": "mail, reports:daily"}
	c, err := loadConfig("worker", nil, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, []string{"mail", "reports:daily"}, c.Queues)
}
