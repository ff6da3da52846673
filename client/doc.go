// Package client is a typed Go client for Flint's JSON API, generated from
// the OpenAPI document (handlers/openapi.json) by oapi-codegen, which is
// pinned as a tool in go.mod. After changing the document, regenerate it:
//
//	go generate ./client
//
// A test fails when the generated code and the document disagree.
package client

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../internal/handlers/openapi.json
