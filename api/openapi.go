package api

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPI is the OpenAPI 3 document of the API, served at /v1/openapi.json.
// A test checks that it documents every route and nothing else, and that
// its schemas have the fields of the Go types.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI document.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

func serveOpenAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/json; charset=utf-8", openAPI)
}
