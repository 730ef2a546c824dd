package anycast

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

const commandUsage = "usage: rampart anycast status -addr AGENT_ADMIN [-json]\n" +
	"       rampart anycast drain   -addr AGENT_ADMIN -token-file F [-vip V] [-reason R]\n" +
	"       rampart anycast undrain -addr AGENT_ADMIN -token-file F [-vip V]"

// Command runs `rampart anycast <sub>`: status (`-addr AGENT_ADMIN [-json]
// [-timeout 5s]`), drain and undrain (DrainCommand).
func Command(args []string, stdout io.Writer) error {
	if len(args) > 0 && (args[0] == "drain" || args[0] == "undrain") {
		return DrainCommand(args, stdout)
	}
	if len(args) == 0 || args[0] != "status" {
		return errors.New(commandUsage)
	}
	fs := flag.NewFlagSet("anycast status", flag.ContinueOnError)
	addr := fs.String("addr", "", "the agent's admin listener, host:port or http(s)://host:port (required)")
	raw := fs.Bool("json", false, "print the JSON as served")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *addr == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("usage: rampart anycast status -addr AGENT_ADMIN [-json]")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	body, err := fetch(ctx, *addr)
	if err != nil {
		return err
	}
	if *raw {
		_, err = stdout.Write(body)
		return err
	}
	var st Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("decode anycast status from %s: %w", *addr, err)
	}
	return WriteStatus(stdout, &st)
}

// FetchStatus gets the Status an agent serves on StatusPath at addr.
func FetchStatus(ctx context.Context, addr string) (*Status, error) {
	body, err := fetch(ctx, addr)
	if err != nil {
		return nil, err
	}
	var st Status
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("decode anycast status from %s: %w", addr, err)
	}
	return &st, nil
}

func fetch(ctx context.Context, addr string) ([]byte, error) {
	url := addr
	if !strings.Contains(addr, "://") {
		url = "http://" + addr
	}
	url = strings.TrimSuffix(url, "/") + StatusPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("anycast status: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch anycast status: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read anycast status from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("anycast status from %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// WriteStatus prints a Status for people.
func WriteStatus(w io.Writer, st *Status) error {
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return st.Time.Sub(t).Round(time.Second).String() + " ago"
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "site %d  AS %d  router id %s  min_sites %d  dry run %s  prefixes announced %d",
		st.Site, st.LocalAS, st.RouterID, st.MinSites, st.DryRun, st.PrefixesAnnounced)
	if st.DryRun != DryRunOff {
		fmt.Fprintf(tw, " (dry run: would announce %d)", st.PrefixesWouldAnnounce)
	}
	if st.Stopping {
		fmt.Fprint(tw, "  STOPPING")
	}
	if st.GuardSource != "" {
		fmt.Fprintf(tw, "\nguard counts other sites from: %s", st.GuardSource)
	}
	for _, d := range st.Drains {
		vip := d.VIP
		if vip == "" {
			vip = "every VIP"
		}
		fmt.Fprintf(tw, "\nDRAINED by %s: %s since %s", d.Source, vip, d.Since.Format(time.RFC3339))
		if d.Reason != "" {
			fmt.Fprintf(tw, " (%s)", d.Reason)
		}
	}
	fmt.Fprintf(tw, "\n\nSESSION\tAS\tSTATE\tSINCE\tRECEIVED\n")
	for _, s := range st.Sessions {
		state := s.State
		if s.Admin == "down" {
			state += " (admin down)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\n", s.Peer, s.AS, state, ago(s.Since), s.Received)
	}
	if len(st.Sessions) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	fmt.Fprintf(tw, "\nVIP\tSTATE\tSINCE\tWHY\n")
	for _, v := range st.VIPs {
		state := string(v.State)
		if v.DryRun != "" {
			state += " (dry run: " + v.DryRun + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Prefix, state, ago(v.Since), v.Reason)
		a, label := v.OnWire, "on the wire"
		if a == nil && v.WouldSend != nil {
			a, label = v.WouldSend, "would send (dry run, not sent)"
		}
		if a != nil {
			fmt.Fprintf(tw, "\t  %s: next hop %s", label, nextHopText(a))
			if len(a.ASPath) > 0 {
				fmt.Fprintf(tw, ", prepend %v", a.ASPath)
			}
			if a.MED != nil {
				fmt.Fprintf(tw, ", med %d", *a.MED)
			}
			if len(a.Communities) > 0 {
				fmt.Fprintf(tw, ", communities %s", strings.Join(a.Communities, " "))
			}
			fmt.Fprintf(tw, ", large %s\n", strings.Join(a.LargeCommunities, " "))
		}
		if v.Drained != "" {
			fmt.Fprintf(tw, "\t  %s\n", v.Drained)
		}
		if v.WireError != "" {
			fmt.Fprintf(tw, "\t  wire error: %s\n", v.WireError)
		}
		if !v.HoldDownUntil.IsZero() {
			fmt.Fprintf(tw, "\t  hold-down until %s (%d recent falls)\n", v.HoldDownUntil.Format(time.RFC3339), v.RecentFalls)
		}
		var others []string
		for _, o := range v.Guard.Others {
			id := fmt.Sprint(o.Site)
			if o.Name != "" {
				id = o.Name
			}
			others = append(others, id+":"+string(o.State))
		}
		fmt.Fprintf(tw, "\t  guard: active %v, other sites [%s]", v.Guard.Active, strings.Join(others, " "))
		if v.Guard.Last != "" {
			fmt.Fprintf(tw, ", last verdict: %s", v.Guard.Last)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "\nINPUT\tKIND\tSTATE\tLAST SAMPLE\tIN A ROW\tRISE/FALL\tDETAIL\n")
	for _, in := range st.Inputs {
		state, last, run := "down", "bad", fmt.Sprintf("%d bad", in.Bad)
		if in.Up {
			state = "up"
		}
		if in.LastOK {
			last, run = "good", fmt.Sprintf("%d good", in.Good)
		}
		kind := in.Kind
		if in.Global {
			kind += " (global)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", in.Name, kind, state, last, run, in.Rise, in.Fall, in.Detail)
	}
	return tw.Flush()
}

// nextHopText is a path's next hop for people: "self" says whose address.
func nextHopText(a *Attributes) string {
	if a.NextHop != nextHopSelf {
		return a.NextHop
	}
	if len(a.NextHopByPeer) == 0 {
		return "self (each session's local address; none established)"
	}
	var per []string
	for peer, nh := range a.NextHopByPeer {
		per = append(per, nh+" to "+peer)
	}
	sort.Strings(per)
	return "self (" + strings.Join(per, ", ") + ")"
}
