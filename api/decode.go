package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/prescient-sched/prescient/internal/strictjson"
)

// requestError is the caller's fault: a 400 with a code and a message that
// names what is wrong and where.
type requestError struct {
	code, msg string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) *requestError {
	return &requestError{code: "invalid_request", msg: fmt.Sprintf(format, args...)}
}

// readJSON decodes the request body into dst: one JSON object, no unknown
// fields, no more than limit bytes, nothing after it. An empty body is an
// error unless optional.
func readJSON(c *gin.Context, limit int64, dst any, optional bool) *requestError {
	data, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &requestError{code: "body_too_large", msg: fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit)}
		}
		return &requestError{code: "bad_body", msg: "reading the request body: " + err.Error()}
	}
	return decodeJSON(data, dst, optional)
}

// DecodeBody decodes a request body for dst as the server does (one JSON
// object, no unknown fields, what strictjson refuses), for a client that
// checks its request before sending it: the same input, the same words.
func DecodeBody(data []byte, dst any) error {
	if e := decodeJSON(data, dst, false); e != nil {
		return e
	}
	return nil
}

// decodeJSON is readJSON on bytes read.
func decodeJSON(data []byte, dst any, optional bool) *requestError {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		if optional {
			return nil
		}
		return &requestError{code: "malformed_json", msg: "request body is empty; want a JSON object"}
	}
	if bytes.Equal(trimmed, []byte("null")) { // which decodes into any object as nothing at all
		return &requestError{code: "malformed_json", msg: "want a JSON object, got null"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &requestError{code: "malformed_json", msg: fmt.Sprintf("malformed JSON: data after the object at byte %d", dec.InputOffset())}
	}
	if err := strictjson.Check(data, reflect.TypeOf(dst)); errors.Is(err, strictjson.ErrUnknownField) {
		return &requestError{code: "unknown_field", msg: err.Error()}
	} else if err != nil {
		return badRequest("%s", err)
	}
	return nil
}

// jsonError turns a decoding error into a message that says where.
func jsonError(err error) *requestError {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return &requestError{code: "malformed_json", msg: fmt.Sprintf("malformed JSON at byte %d: %s", syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: "))}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &requestError{code: "malformed_json", msg: "malformed JSON: the body ends in the middle of a value"}
	case errors.As(err, &typ) && typ.Field == "":
		return &requestError{code: "malformed_json", msg: fmt.Sprintf("want a JSON object, got %s", typ.Value)}
	case errors.As(err, &typ):
		return &requestError{code: "invalid_request", msg: fmt.Sprintf("%s: want %s, got %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return &requestError{code: "unknown_field", msg: "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")}
	}
	return &requestError{code: "malformed_json", msg: "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "an integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "string":
		return "a string"
	case k == "bool":
		return "true or false"
	case k == "slice", k == "array":
		return "an array"
	case k == "map", k == "struct":
		return "an object"
	}
	return k
}

// abortRequest answers a request error.
func abortRequest(c *gin.Context, e *requestError) {
	writeError(c, http.StatusBadRequest, e.code, e.msg)
}

// encodeJSON is v as JSON and a newline.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // JSON for programs; "<token>" reads better than "\u003ctoken\u003e"
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	return buf.Bytes(), nil
}
