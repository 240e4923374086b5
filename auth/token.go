package auth

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// checkTokenOptions names what is wrong with a jwt auth_token before
// etcd's token provider reads it (it reports every problem as "invalid
// auth options"): an unknown option, a TTL that does not parse, a key
// file that cannot be read, a sign method jwt does not know.
func checkTokenOptions(token string) error {
	kind, opts, _ := strings.Cut(token, ",")
	if kind != "jwt" {
		return nil
	}
	for _, o := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "ttl":
			if _, err := time.ParseDuration(v); err != nil {
				return fmt.Errorf("ttl=%s: %w (a Go duration, e.g. 5m)", v, err)
			}
		case "pub-key", "priv-key":
			if _, err := os.ReadFile(v); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		case "sign-method":
			if v == "none" || jwt.GetSigningMethod(v) == nil {
				algs := slices.DeleteFunc(jwt.GetAlgorithms(), func(a string) bool { return a == "none" })
				slices.Sort(algs)
				return fmt.Errorf("sign-method=%s: unknown; one of %s", v, strings.Join(algs, ", "))
			}
		default:
			return fmt.Errorf("unknown option %q (jwt takes pub-key, priv-key, sign-method, ttl)", k)
		}
	}
	return nil
}
