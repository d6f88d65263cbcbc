package params

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSeconds(t *testing.T) {
	cases := []struct {
		name   string
		p      map[string]string
		param  string
		n      int
		ok     bool
		errMsg string
	}{
		{"unset", map[string]string{}, "lock_wait", 0, false, ""},
		{"set", map[string]string{"lock_wait": " 3 "}, "lock_wait", 3, true, ""},
		{"lowest", map[string]string{"wait_timeout": "1"}, "wait_timeout", 1, true, ""},
		{"below its range", map[string]string{"wait_timeout": "0"}, "wait_timeout", 0, false, "--param wait_timeout=0: want a whole number of seconds from 1 to 31536000"},
		{"not a number", map[string]string{"replica_delay": "2s"}, "replica_delay", 0, false, "--param replica_delay=2s: want a whole number of seconds from 0 to 2147483647"},
		{"not a setting in seconds", map[string]string{"keep_datadir": "true"}, "keep_datadir", 0, false, "--param keep_datadir is not a MySQL setting in seconds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, ok, err := Seconds(tc.p, tc.param)
			if tc.errMsg != "" {
				require.EqualError(t, err, tc.errMsg)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.n, n)
			require.Equal(t, tc.ok, ok)
		})
	}
}
