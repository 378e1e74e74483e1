package jetstream

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRenderSubject(t *testing.T) {
	t.Parallel()

	t.Run("RendersPlaceholders", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			tmpl, source, eventType, want string
		}{
			{"stripe.{type}", "stripe", "invoice.paid", "stripe.invoice.paid"},
			{"{source}.{type}", "stripe", "customer.subscription.created", "stripe.customer.subscription.created"},
			{"events.{source}-{type}", "github", "push", "events.github-push"},
			{"{type}.{source}", "shopify", "orders/create", "orders/create.shopify"},
			{"fixed.subject", "stripe", "invoice.paid", "fixed.subject"},
			{"{source}.{source}", "bank", "x", "bank.bank"},
			{"café.{type}", "s", "reçu.payé", "café.reçu.payé"},
		} {
			got, err := RenderSubject(tc.tmpl, tc.source, tc.eventType)
			require.NoError(t, err, tc.tmpl)
			require.Equal(t, tc.want, got, tc.tmpl)
		}
	})

	t.Run("ReplacesCharactersASubjectCannotCarry", func(t *testing.T) {
		t.Parallel()
		for eventType, want := range map[string]string{
			"Message Sent":            "x.Message_Sent",
			"tab\there":               "x.tab_here",
			"line\nbreak\r":           "x.line_break_",
			"invoice.*":               "x.invoice._",
			"invoice.>":               "x.invoice._",
			"a*b>c":                   "x.a_b_c",
			"$JS.API.STREAM.DELETE.S": "x._JS.API.STREAM.DELETE.S",
			"cost$":                   "x.cost_",
			"nul\x00":                 "x.nul_",
			"bad\xffutf8":             "x.bad_utf8",
			"nbsp\u00a0here":          "x.nbsp_here",
		} {
			got, err := RenderSubject("x.{type}", "s", eventType)
			require.NoError(t, err, "%q", eventType)
			require.Equal(t, want, got, "%q", eventType)
			require.NoError(t, ValidateSubject(got))
		}
	})

	t.Run("SystemSubjectsAreUnreachableFromAValue", func(t *testing.T) {
		t.Parallel()
		got, err := RenderSubject("{type}", "s", "$JS.API.STREAM.DELETE.ORDERS")
		require.NoError(t, err)
		require.Equal(t, "_JS.API.STREAM.DELETE.ORDERS", got)
	})

	t.Run("RefusesEmptyTokensInAValue", func(t *testing.T) {
		t.Parallel()
		for _, eventType := range []string{"", ".paid", "invoice.", "invoice..paid", "."} {
			_, err := RenderSubject("stripe.{type}", "stripe", eventType)
			require.ErrorIs(t, err, ErrInvalidSubject, "%q", eventType)
			require.ErrorContains(t, err, "empty token")
		}
		_, err := RenderSubject("{source}.x", "", "t")
		require.ErrorIs(t, err, ErrInvalidSubject)
		require.ErrorContains(t, err, "source")
	})

	t.Run("RefusesABadTemplate", func(t *testing.T) {
		t.Parallel()
		for _, tmpl := range []string{
			"",
			"stripe.{kind}",
			"stripe.{type",
			"stripe.type}",
			"stripe.{}",
			"stripe.{{type}}",
			"stripe..{type}",
			".{type}",
			"{type}.",
			"stripe.*",
			"stripe.>",
			"stripe.{type}.>",
			"stripe {type}",
			"stripe.\t{type}",
		} {
			_, err := RenderSubject(tmpl, "stripe", "invoice.paid")
			require.ErrorIs(t, err, ErrInvalidSubject, "%q", tmpl)
			require.ErrorIs(t, CheckTemplate(tmpl), ErrInvalidSubject, "%q", tmpl)
		}
	})

	t.Run("CheckTemplateAcceptsAGoodTemplate", func(t *testing.T) {
		t.Parallel()
		for _, tmpl := range []string{"stripe.{type}", "{source}.{type}", "fixed", "$events.{type}"} {
			require.NoError(t, CheckTemplate(tmpl), tmpl)
		}
	})
}

func TestValidateSubject(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "a.b.c", "orders/create", "a-b_c", "$JS.literal", "café"} {
		require.NoError(t, ValidateSubject(ok), ok)
	}
	for _, bad := range []string{"", ".", "a.", ".a", "a..b", "a.*", "a.>", "a*", "a b", "a\tb", "a\nb", "a\x00"} {
		require.ErrorIs(t, ValidateSubject(bad), ErrInvalidSubject, "%q", bad)
	}
}

// FuzzRenderSubject checks that whatever a value holds, a rendered subject is
// one Publish accepts, with exactly the tokens of the value.
func FuzzRenderSubject(f *testing.F) {
	for _, seed := range []string{"invoice.paid", "Message Sent", "a.*", "$JS.API", "x\xff", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, eventType string) {
		got, err := RenderSubject("p.{type}", "s", eventType)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidSubject)
			require.Contains(t, "."+eventType+".", "..", "refused %q without an empty token", eventType)
			return
		}
		require.NoError(t, ValidateSubject(got))
		require.Equal(t, strings.Count(eventType, ".")+2, strings.Count(got, ".")+1)
		require.NotContains(t, got, "$")
	})
}
