package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/flinthq/flint/client"
)

// Enqueue a job and read it back. The key comes from the environment, as
// in the README's examples (eval "$(make -s env)").
func Example() {
	ctx := context.Background()
	c, err := client.NewClientWithResponses("http://localhost:8080", client.WithRequestEditorFn(
		func(_ context.Context, req *http.Request) error {
			req.Header.Set("X-API-Key", os.Getenv("FLINT_API_KEY"))
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	payload := map[string]any{"url": "https://example.com"}
	res, err := c.EnqueueJobWithResponse(ctx, client.EnqueueJobJSONRequestBody{Type: "http_request", Payload: &payload})
	if err != nil {
		log.Fatal(err)
	}
	if res.JSON201 == nil {
		log.Fatalf("enqueue refused: %d %s", res.StatusCode(), res.Body)
	}
	job, err := c.GetJobWithResponse(ctx, *res.JSON201.Id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*job.JSON200.Status)
}
