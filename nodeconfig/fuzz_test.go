package nodeconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics; whatever it accepts renders, into
// environment files of one RAMPART_ARGS line each whose arguments have no
// character that would split or expand differently under systemd.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"full.yaml", "minimal.yaml", "token-file.yaml", "invalid.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("node: {id: a, region: b}\ninterfaces: [eth0]\ncontrol: {url: 'http://[::1]:1', token: x}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		files, err := c.Render("/etc/rampart")
		if err != nil {
			t.Fatalf("accepted config does not render: %v\n%s", err, data)
		}
		for _, fl := range files {
			if fl.Name != AgentEnv && fl.Name != ProxyEnv {
				continue
			}
			lines := strings.Split(strings.TrimSuffix(string(fl.Data), "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[1], "RAMPART_ARGS=-") {
				t.Fatalf("%s is not a comment and one RAMPART_ARGS line:\n%s", fl.Name, fl.Data)
			}
			if strings.ContainsAny(lines[1], "\"'\\$`\t\r") {
				t.Fatalf("%s has a quote, backslash, $ or control character:\n%s", fl.Name, fl.Data)
			}
			// Merged over any file, one RAMPART_ARGS line remains: this one.
			merged := string(MergeEnv(data, fl.Data))
			if strings.Count("\n"+merged, "\n"+lines[1]+"\n") != 1 {
				t.Fatalf("MergeEnv over the input lost or doubled the args line:\n%s", merged)
			}
		}
	})
}
