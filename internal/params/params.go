// Package params reads the --param settings that both a topology's servers
// and a scheme's clients take (the MySQL settings in seconds), so that
// clusters/recipe and locks parse them alike without one importing the
// other.
package params

import (
	"fmt"
	"strconv"
	"strings"
)

// secondsRanges are the bounds of the MySQL settings in whole seconds:
// MariaDB's own (it would clamp a larger value without a word).
var secondsRanges = map[string][2]int{
	"wait_timeout":             {1, 31536000},
	"innodb_lock_wait_timeout": {0, 1073741824},
	"lock_wait":                {0, 31536000},
	"replica_delay":            {0, 2147483647},
}

// Seconds reads the MySQL setting name (a whole number of seconds in
// MariaDB's range) from --param values; ok is false when it is not set.
func Seconds(p map[string]string, name string) (n int, ok bool, err error) {
	v, ok := p[name]
	if !ok {
		return 0, false, nil
	}
	r, known := secondsRanges[name]
	if !known {
		return 0, false, fmt.Errorf("--param %s is not a MySQL setting in seconds", name)
	}
	n, err = strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < r[0] || n > r[1] {
		return 0, false, fmt.Errorf("--param %s=%s: want a whole number of seconds from %d to %d", name, v, r[0], r[1])
	}
	return n, true, nil
}
