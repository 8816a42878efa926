package e2b

import (
	"encoding/json"
	"strings"
	"testing"
)

// translate runs API stream lines through a translator and returns the
// code interpreter's lines, decoded.
func translate(t *testing.T, lines ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	tr := newTranslator(func(b []byte) {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("translator wrote %q: %v", b, err)
		}
		out = append(out, m)
	})
	for _, l := range lines {
		tr.line([]byte(l))
	}
	tr.end()
	return out
}

func TestTranslate(t *testing.T) {
	const end = `{"type":"end_of_execution"}`
	for _, tc := range []struct {
		name string
		in   []string
		want []string // JSON of each output line
	}{
		{"stdout in pieces becomes lines",
			[]string{`{"type":"stdout","data":"hello"}`, `{"type":"stdout","data":" world\n2\n3"}`, `{"type":"result","exit_code":0}`},
			[]string{`{"type":"stdout","text":"hello world\n"}`, `{"type":"stdout","text":"2\n"}`, `{"type":"stdout","text":"3"}`, end}},
		{"streams kept apart",
			[]string{`{"type":"stdout","data":"a"}`, `{"type":"stderr","data":"b\n"}`, `{"type":"stdout","data":"c\n"}`, `{"type":"result"}`},
			[]string{`{"type":"stderr","text":"b\n"}`, `{"type":"stdout","text":"ac\n"}`, end}},
		{"last expression is the main result, with the execution count",
			[]string{`{"type":"display","mime":"text/plain","data":"2"}`, `{"type":"result","kernel":{"execution_count":3}}`},
			[]string{`{"type":"result","text":"2","is_main_result":true}`, `{"type":"number_of_executions","execution_count":3}`, end}},
		{"a DataFrame's html and text are one result",
			[]string{`{"type":"display","mime":"text/html","data":"<table/>"}`, `{"type":"display","mime":"text/plain","data":"a b"}`, `{"type":"result"}`},
			[]string{`{"type":"result","html":"<table/>","text":"a b","is_main_result":true}`, end}},
		{"a chart then output: not main",
			[]string{`{"type":"display","mime":"image/png","data_base64":"iVBO"}`, `{"type":"stdout","data":"x\n"}`, `{"type":"result"}`},
			[]string{`{"type":"result","png":"iVBO","is_main_result":false}`, `{"type":"stdout","text":"x\n"}`, end}},
		{"two charts are two results",
			[]string{`{"type":"display","mime":"image/png","data_base64":"AA=="}`, `{"type":"display","mime":"image/png","data_base64":"BB=="}`, `{"type":"result"}`},
			[]string{`{"type":"result","png":"AA==","is_main_result":false}`, `{"type":"result","png":"BB==","is_main_result":false}`, end}},
		{"json stays an object; plotly and unknown types",
			[]string{`{"type":"display","mime":"application/json","data":{"a":1}}`, `{"type":"display","mime":"application/x-widget","data":"?"}`, `{"type":"result"}`},
			[]string{`{"type":"result","json":{"a":1},"is_main_result":false}`, end}},
		{"an exception is the error",
			[]string{`{"type":"stderr","data":"Traceback...\n"}`, `{"type":"result","exception":{"type":"ValueError","message":"boom","traceback":"Traceback...\nValueError: boom"}}`},
			[]string{`{"type":"stderr","text":"Traceback...\n"}`, `{"type":"error","name":"ValueError","value":"boom","traceback":"Traceback...\nValueError: boom"}`, end}},
		{"a timeout without an exception",
			[]string{`{"type":"result","timed_out":true,"signal":"SIGKILL"}`},
			[]string{`{"type":"error","name":"TimeoutError","value":"the execution ran past its timeout and was killed","traceback":""}`, end}},
		{"an error after the stream started",
			[]string{`{"type":"stdout","data":"x"}`, `{"type":"error","error":{"code":"internal","message":"launch failed"}}`},
			[]string{`{"type":"stdout","text":"x"}`, `{"type":"error","name":"internal","value":"launch failed","traceback":""}`, end}},
		{"a broken line",
			[]string{`{"type":`},
			[]string{`{"type":"error","name":"StreamError","value":"bad line in the exec stream: unexpected end of JSON input","traceback":""}`, end}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := translate(t, tc.in...)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d lines %v; want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				var want map[string]any
				if err := json.Unmarshal([]byte(w), &want); err != nil {
					t.Fatal(err)
				}
				gb, _ := json.Marshal(got[i])
				wb, _ := json.Marshal(want)
				if string(gb) != string(wb) {
					t.Errorf("line %d: got %s; want %s", i, gb, wb)
				}
			}
		})
	}
}

func TestTranslateLongLine(t *testing.T) {
	long := strings.Repeat("x", maxPartialLine+1)
	b, _ := json.Marshal(map[string]string{"type": "stdout", "data": long})
	got := translate(t, string(b))
	if len(got) != 2 || got[0]["text"] != long {
		t.Fatalf("a line past the hold-back limit is sent as it is: %d lines", len(got))
	}
}
