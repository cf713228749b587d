// Package strictjson checks what encoding/json lets through silently in
// a request body: an object key that names a field only when case is
// ignored ({"GPUS": 2} filling gpus), a key given twice (the last wins),
// and text that is not Unicode (invalid UTF-8, or a lone surrogate such as
// "\ud800"), which the decoder turns into U+FFFD. Check runs beside the
// decoder: it says what is wrong and where; the decoder still types.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Check reports the first problem of data as a body for a value of type t
// (the type json.Unmarshal would fill): its error names the field path
// and, for text, the byte offset. Syntax errors are left to the decoder
// (Check returns nil on them).
func Check(data []byte, t reflect.Type) error {
	if err := checkText(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := walk(dec, t, "")
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil // the decoder says it better
	}
	return err
}

// checkText refuses invalid UTF-8 and \u escapes that are lone surrogates.
func checkText(data []byte) error {
	if !utf8.Valid(data) {
		for i := 0; i < len(data); {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n == 1 {
				return fmt.Errorf("byte %d: not UTF-8 text", i)
			}
			i += n
		}
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			continue
		}
		if data[i+1] != 'u' {
			i++ // an escape of one character: \\ or \"
			continue
		}
		r, ok := hex4(data, i+2)
		if !ok {
			continue // the decoder refuses it
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := hex4(data, i+8); ok && i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 11
				continue
			}
			return fmt.Errorf("byte %d: \\u%04x is half of a surrogate pair with no second half: not a character", i, r)
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Errorf("byte %d: \\u%04x is the second half of a surrogate pair with no first half: not a character", i, r)
		}
		i += 5
	}
	return nil
}

func hex4(data []byte, at int) (rune, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// ErrUnknownField is wrapped by Check's error for a key that names a
// field only when case is ignored.
var ErrUnknownField = errors.New("unknown field")

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// walk reads one value for type t (nil: anything) and checks its keys.
func walk(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(jsonUnmarshaler) || t.Implements(jsonUnmarshaler)) {
		t = nil // its own decoding: keys are its business
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return walkObject(dec, t, path)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ]
		return err
	}
	return nil
}

func walkObject(dec *json.Decoder, t reflect.Type, path string) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = fieldsOf(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		at := join(path, key)
		if seen[key] {
			return fmt.Errorf("field %s: given twice", at)
		}
		seen[key] = true
		next := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, key) {
						return fmt.Errorf("field %s: %w; field names are case-sensitive: did you mean %q?", at, ErrUnknownField, name)
					}
				}
			}
			next = ft
		}
		if err := walk(dec, next, at); err != nil {
			return err
		}
	}
	_, err := dec.Token() // }
	return err
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf is the JSON names of a struct's fields, those of embedded
// structs without a name of their own promoted, as encoding/json does.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			inner := ft
			if inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				for k, v := range fieldsOf(inner) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	fieldCache.Store(t, out)
	return out
}
