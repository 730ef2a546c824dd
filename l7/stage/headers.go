package stage

func init() {
	register(SlotHeaders, buildHeaders)
	register(SlotIdentityHeaders, buildIdentityHeaders)
}

// headers applies the route's request header rules (the response half is
// applied by forward, to the upstream's answer).
type headers struct{ r *Route }

func buildHeaders(r *Route, _ *Env) (Stage, error) {
	if r.Rules == nil {
		return nil, nil
	}
	return &headers{r: r}, nil
}

func (*headers) Name() string { return "headers" }

func (s *headers) Serve(x *Exchange) Verdict {
	s.r.Rules.ApplyRequest(x.R.Header)
	return Continue
}

// identityHeaders sets the verified identity's headers (identity_headers)
// after the header rules, so no rule can forge or remove them; routes that
// authenticate only.
type identityHeaders struct{ keys IdentityKeys }

func buildIdentityHeaders(r *Route, env *Env) (Stage, error) {
	if r.Config.AuthPolicyID == "" {
		return nil, nil
	}
	return &identityHeaders{keys: env.Identity}, nil
}

func (*identityHeaders) Name() string { return "identity_headers" }

func (s *identityHeaders) Serve(x *Exchange) Verdict {
	s.keys.set(x.R.Header, &x.Identity)
	return Continue
}
