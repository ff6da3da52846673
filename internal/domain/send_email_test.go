package domain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// fakeMailer records what it is asked to send and fails as told.
type fakeMailer struct {
	mu   sync.Mutex
	sent []domain.Email
	err  error
}

func (f *fakeMailer) Send(ctx context.Context, e domain.Email) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.sent = append(f.sent, e)
	return nil
}

func (f *fakeMailer) Sent() []domain.Email {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]domain.Email(nil), f.sent...)
}

func emailValidator(t *testing.T) jobs.PayloadValidator {
	t.Helper()
	v, ok := domain.NewSendEmailHandler(&fakeMailer{}).(jobs.PayloadValidator)
	require.True(t, ok, "the send_email handler must validate payloads")
	return v
}

// payload builds a JSON payload from a map so that test cases stay readable.
func payload(t *testing.T, m map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func addresses(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user%d@example.com", i)
	}
	return out
}

// emailPayload is a valid send_email payload with the fields in over set,
// or removed where over gives nil.
func emailPayload(over map[string]any) map[string]any {
	m := map[string]any{"to": "a@example.com", "subject": "Hello", "text": "Hi"}
	for k, val := range over {
		if val == nil {
			delete(m, k)
		} else {
			m[k] = val
		}
	}
	return m
}

func long(n int) string { return strings.Repeat("x", n) }

func TestSendEmailValidatePayload(t *testing.T) {
	t.Parallel()
	v := emailValidator(t)
	base := emailPayload
	valid := []struct {
		name string
		p    map[string]any
	}{
		{"string to", base(nil)},
		{"list to", base(map[string]any{"to": []string{"a@example.com", "b@example.org"}})},
		{"named address", base(map[string]any{"to": "Ann Example <ann@example.com>"})},
		{"quoted name with comma", base(map[string]any{"to": `"Example, Ann" <ann@example.com>`})},
		{"fifty addresses", base(map[string]any{"to": addresses(50)})},
		{"html only", base(map[string]any{"text": nil, "html": "<p>Hi</p>"})},
		{"text and html", base(map[string]any{"html": "<p>Hi</p>"})},
		{"empty text with html", base(map[string]any{"text": "", "html": "<p>Hi</p>"})},
		{"unicode subject", base(map[string]any{"subject": "Grüße — ✓"})},
		{"tab in subject", base(map[string]any{"subject": "a\tb"})},
		{"998-byte subject", base(map[string]any{"subject": long(998)})},
		{"1 MiB text", base(map[string]any{"text": long(1 << 20)})},
		{"multi-line body", base(map[string]any{"text": "line 1\r\nBcc: not-a-header@example.com\n"})},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, v.ValidatePayload(payload(t, tc.p)))
		})
	}
}

func TestSendEmailValidatePayloadRefuses(t *testing.T) {
	t.Parallel()
	v := emailValidator(t)
	base := emailPayload
	invalid := []struct {
		name string
		raw  string // used when set
		p    map[string]any
		want []string // substrings of the error
	}{
		{name: "empty object", raw: `{}`, want: []string{`"to"`}},
		{name: "malformed JSON", raw: `{"to":`, want: []string{"malformed JSON"}},
		{name: "not an object", raw: `["a@example.com"]`, want: []string{"must be"}},
		{name: "missing to", p: base(map[string]any{"to": nil}), want: []string{`needs "to"`}},
		{name: "null to", raw: `{"to": null, "subject": "s", "text": "t"}`, want: []string{`needs "to"`}},
		{name: "number to", raw: `{"to": 5, "subject": "s", "text": "t"}`, want: []string{`"to" must be an address or a list`}},
		{name: "object to", raw: `{"to": {"a": 1}, "subject": "s", "text": "t"}`, want: []string{`"to" must be`}},
		{name: "empty list", p: base(map[string]any{"to": []string{}}), want: []string{`"to"`, "at least one"}},
		{name: "51 addresses", p: base(map[string]any{"to": addresses(51)}), want: []string{`"to"`, "at most 50"}},
		{name: "non-string in list", raw: `{"to": ["a@example.com", 5], "subject": "s", "text": "t"}`, want: []string{`"to[1]" must be a string`}},
		{name: "null in list", raw: `{"to": ["a@example.com", null], "subject": "s", "text": "t"}`, want: []string{`"to[1]" must be a string`}},
		{name: "empty address", p: base(map[string]any{"to": ""}), want: []string{`"to"`, "empty"}},
		{name: "not an address", p: base(map[string]any{"to": "not-an-address"}), want: []string{`"to"`, "not a valid email address"}},
		{name: "bad address in list", p: base(map[string]any{"to": []string{"a@example.com", "b@"}}), want: []string{`"to[1]"`, "not a valid email address"}},
		{name: "two addresses in one string", p: base(map[string]any{"to": "a@example.com, b@example.com"}), want: []string{`"to"`, "not a valid email address"}},
		{name: "overlong address", p: base(map[string]any{"to": long(320) + "@example.com"}), want: []string{`"to"`, "at most 320 bytes"}},
		{name: "missing subject", p: base(map[string]any{"subject": nil}), want: []string{`"subject"`}},
		{name: "empty subject", p: base(map[string]any{"subject": ""}), want: []string{`"subject"`}},
		{name: "blank subject", p: base(map[string]any{"subject": "   "}), want: []string{`"subject"`}},
		{name: "number subject", raw: `{"to": "a@example.com", "subject": 5, "text": "t"}`, want: []string{`"subject" must be a string`}},
		{name: "999-byte subject", p: base(map[string]any{"subject": long(999)}), want: []string{`"subject"`, "at most 998 bytes"}},
		{name: "NUL in subject", p: base(map[string]any{"subject": "a\x00b"}), want: []string{`"subject"`}},
		{name: "DEL in subject", p: base(map[string]any{"subject": "a\x7fb"}), want: []string{`"subject"`}},
		{name: "no body", p: base(map[string]any{"text": nil}), want: []string{`"text" or "html"`}},
		{name: "empty bodies", p: base(map[string]any{"text": "", "html": ""}), want: []string{`"text" or "html"`}},
		{name: "text too long", p: base(map[string]any{"text": long(1<<20 + 1)}), want: []string{`"text"`, "at most 1048576 bytes"}},
		{name: "html too long", p: base(map[string]any{"html": long(1<<20 + 1)}), want: []string{`"html"`, "at most 1048576 bytes"}},
		{name: "NUL in html", p: base(map[string]any{"html": "a\x00b"}), want: []string{`"html"`, "NUL"}},
		{name: "unknown field", p: base(map[string]any{"cc": "b@example.com"}), want: []string{"unknown field", "cc"}},
		{name: "unknown field bcc", p: base(map[string]any{"bcc": []string{"evil@example.com"}}), want: []string{"unknown field", "bcc"}},
	}
	for _, tc := range invalid {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			raw := json.RawMessage(tc.raw)
			if tc.raw == "" {
				raw = payload(t, tc.p)
			}
			err := v.ValidatePayload(raw)
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// Every way of smuggling a header line in through the subject or a
// recipient is refused, whether it comes in a payload or an Email built in
// code.
func TestSendEmailHeaderInjectionRefused(t *testing.T) {
	t.Parallel()
	v := emailValidator(t)
	subjects := []string{
		"Hi\r\nBcc: evil@example.com",
		"Hi\nBcc: evil@example.com",
		"Hi\rBcc: evil@example.com",
		"Hi\r\n\r\nInjected body",
		"Hi\x00\r\nBcc: evil@example.com",
		"Hi\r\n Bcc: evil@example.com", // folded continuation
	}
	for i, s := range subjects {
		t.Run(fmt.Sprintf("subject/%d", i), func(t *testing.T) {
			t.Parallel()
			err := v.ValidatePayload(payload(t, map[string]any{"to": "a@example.com", "subject": s, "text": "t"}))
			require.Error(t, err)
			require.Contains(t, err.Error(), `"subject"`)
			require.Error(t, domain.Email{To: []string{"a@example.com"}, Subject: s, Text: "t"}.Validate())
		})
	}
	recipients := []string{
		"a@example.com\r\nBcc: evil@example.com",
		"a@example.com\nBcc: evil@example.com",
		"Ann\r\nBcc: evil@example.com <a@example.com>",
		"\"Ann\r\nBcc: evil@example.com\" <a@example.com>",
		"=?utf-8?q?Ann=0D=0ABcc:_evil@example.com?= <a@example.com>",
		"=?utf-8?b?QW5uDQpCY2M6IGV2aWxAZXhhbXBsZS5jb20=?= <a@example.com>",
	}
	for i, r := range recipients {
		t.Run(fmt.Sprintf("to/%d", i), func(t *testing.T) {
			t.Parallel()
			for _, to := range []any{r, []string{"ok@example.com", r}} {
				err := v.ValidatePayload(payload(t, map[string]any{"to": to, "subject": "s", "text": "t"}))
				require.Error(t, err, "to=%q", to)
				require.Contains(t, err.Error(), `"to`)
			}
			require.Error(t, domain.Email{To: []string{r}, Subject: "s", Text: "t"}.Validate())
		})
	}
}

func TestSendEmailWorkToStringOrList(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		to     any
		wantTo []string // Email.To passed to the mailer
		result []string // "to" in the job result
	}{
		{"string", "a@example.com", []string{"a@example.com"}, []string{"a@example.com"}},
		{"one-element list", []string{"a@example.com"}, []string{"a@example.com"}, []string{"a@example.com"}},
		{"list keeps order", []string{"b@example.org", "a@example.com"}, []string{"b@example.org", "a@example.com"}, []string{"b@example.org", "a@example.com"}},
		{"named", "Ann <ann@example.com>", []string{"Ann <ann@example.com>"}, []string{"ann@example.com"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &fakeMailer{}
			h := domain.NewSendEmailHandler(m)
			job := &jobs.Job{Type: jobs.TypeSendEmail, Attempt: 1, Payload: payload(t, map[string]any{
				"to": tc.to, "subject": "Subject", "text": "Text body", "html": "<b>HTML</b>",
			})}
			res, err := h.Work(context.Background(), job)
			require.NoError(t, err)

			sent := m.Sent()
			require.Len(t, sent, 1)
			require.Equal(t, domain.Email{To: tc.wantTo, Subject: "Subject", Text: "Text body", HTML: "<b>HTML</b>"}, sent[0])

			// The result is stored as JSON; check that shape.
			b, err := json.Marshal(res)
			require.NoError(t, err)
			var got struct {
				To       []string `json:"to"`
				Accepted bool     `json:"accepted"`
			}
			require.NoError(t, json.Unmarshal(b, &got))
			require.Equal(t, tc.result, got.To)
			require.True(t, got.Accepted)
		})
	}
}

func TestSendEmailWorkErrors(t *testing.T) {
	t.Parallel()
	good := json.RawMessage(`{"to": "a@example.com", "subject": "s", "text": "t"}`)

	t.Run("permanent rejection cancels", func(t *testing.T) {
		t.Parallel()
		perm := fmt.Errorf("550 5.1.1 no such user: %w", domain.ErrPermanentDelivery)
		_, err := domain.NewSendEmailHandler(&fakeMailer{err: perm}).Work(context.Background(), &jobs.Job{Payload: good})
		require.Error(t, err)
		require.True(t, jobs.IsPermanent(err), "a 5xx must fail for good, not retry: %v", err)
		require.ErrorIs(t, err, domain.ErrPermanentDelivery)
		require.Contains(t, err.Error(), "550 5.1.1")
	})
	t.Run("temporary failure retries", func(t *testing.T) {
		t.Parallel()
		temp := errors.New("451 4.3.0 try again later")
		_, err := domain.NewSendEmailHandler(&fakeMailer{err: temp}).Work(context.Background(), &jobs.Job{Payload: good})
		require.ErrorIs(t, err, temp)
		require.False(t, jobs.IsPermanent(err), "a temporary failure must be retried")
	})
	t.Run("context error passes through", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := domain.NewSendEmailHandler(&fakeMailer{}).Work(ctx, &jobs.Job{Payload: good})
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, jobs.IsPermanent(err))
	})
	t.Run("bad payload at run time cancels without sending", func(t *testing.T) {
		t.Parallel()
		m := &fakeMailer{}
		_, err := domain.NewSendEmailHandler(m).Work(context.Background(), &jobs.Job{
			Payload: json.RawMessage(`{"to": "a@example.com", "subject": "a\r\nBcc: evil@example.com", "text": "t"}`),
		})
		require.Error(t, err)
		require.True(t, jobs.IsPermanent(err))
		require.Contains(t, err.Error(), "subject")
		require.Empty(t, m.Sent())
	})
	t.Run("nil mailer is a programming error", func(t *testing.T) {
		t.Parallel()
		require.Panics(t, func() { domain.NewSendEmailHandler(nil) })
	})
}

// Enqueue validation reaches the handler's validator and reports the
// payload as the bad field, with the handler's message naming the key.
func TestSendEmailEnqueueValidation(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	reg.Register(jobs.TypeSendEmail, domain.NewSendEmailHandler(&fakeMailer{}))

	p := jobs.EnqueueParams{Type: jobs.TypeSendEmail, Payload: json.RawMessage(`{"to": "a@example.com", "subject": "x\r\nBcc: evil@example.com", "text": "t"}`)}
	err := p.Validate(reg, time.Now())
	var ve *jobs.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "payload", ve.Field)
	require.Contains(t, ve.Message, `"subject"`)

	ok := jobs.EnqueueParams{Type: jobs.TypeSendEmail, Payload: json.RawMessage(`{"to": ["a@example.com"], "subject": "x", "html": "<p>x</p>"}`)}
	require.NoError(t, ok.Validate(reg, time.Now()))
}

func TestEmailRecipients(t *testing.T) {
	t.Parallel()
	got, err := domain.Email{To: []string{"Ann <ann@example.com>", "bob@example.org"}}.Recipients()
	require.NoError(t, err)
	require.Equal(t, []string{"ann@example.com", "bob@example.org"}, got)

	_, err = domain.Email{}.Recipients()
	require.Error(t, err)
}
