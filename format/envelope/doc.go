// Package envelope is the one signed envelope that rampart's documents
// (snapshot, deny list, region state) share: Ed25519 over the format name,
// the version (epoch, sequence), the creation time, the key id and the
// digest of the body. It is a format package: it holds no runtime (no
// goroutines, watchers or metrics), so the control plane may import it.
package envelope
