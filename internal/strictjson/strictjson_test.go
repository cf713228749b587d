package strictjson_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/internal/strictjson"
)

type inner struct {
	GPUs int `json:"gpus"`
}

type body struct {
	inner
	Name     string            `json:"name"`
	Env      map[string]string `json:"env"`
	Jobs     []inner           `json:"jobs"`
	Deadline *time.Time        `json:"deadline"`
	Raw      json.RawMessage   `json:"raw"`
	Hidden   int               `json:"-"`
	Plain    int
}

func TestCheck(t *testing.T) {
	typ := reflect.TypeFor[body]()
	for _, tc := range []struct{ in, want string }{
		{`{"gpus":1,"name":"a","env":{"A":"1","a":"2"},"jobs":[{"gpus":2}],"deadline":"2026-01-01T00:00:00Z","Plain":3}`, ""},
		{`{"raw":{"GPUS":1,"x":1}}`, ""}, // its own decoding
		{`{"name":"\ud83d\ude00 and \\u00e9"}`, ""},
		{`{"gpus":1,"GPUS":2}`, `field GPUS: unknown field; field names are case-sensitive: did you mean "gpus"?`},
		{`{"jobs":[{"gpus":1},{"Gpus":1}]}`, `field jobs[1].Gpus: unknown field; field names are case-sensitive`},
		{`{"plain":1}`, `did you mean "Plain"?`},
		{`{"gpus":1,"gpus":2}`, "field gpus: given twice"},
		{`{"env":{"A":"1","A":"2"}}`, "field env.A: given twice"},
		{`{"name":"x\ud800"}`, `byte 10: \ud800 is half of a surrogate pair`},
		{`{"name":"\udc00"}`, `byte 9: \udc00 is the second half`},
		{"{\"name\":\"\xff\"}", "byte 9: not UTF-8 text"},
		{`{"gpus":`, ""}, // syntax: the decoder's to say
	} {
		err := strictjson.Check([]byte(tc.in), typ)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v; want %q", tc.in, err, tc.want)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"gpus":1,"GPUS":2}`, `{"jobs":[{"gpus":1}]}`, `{"name":"\ud800"}`, `[1,{"a":[]}]`, `"\u"`} {
		f.Add([]byte(s))
	}
	typ := reflect.TypeFor[body]()
	f.Fuzz(func(t *testing.T, b []byte) {
		err := strictjson.Check(b, typ)
		var v body
		if err == nil && json.Unmarshal(b, &v) == nil && strings.Contains(v.Name, "\uFFFD") && !strings.Contains(string(b), "\uFFFD") && !strings.Contains(strings.ToLower(string(b)), `\ufffd`) {
			t.Fatalf("%q passed and decoded a replacement character into name", b)
		}
	})
}
