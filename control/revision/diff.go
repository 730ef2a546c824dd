package revision

import (
	"encoding/json"
	"reflect"
	"sort"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Diff compares two normalised configs: routes and clusters added,
// removed and changed (by id and name), each changed route with its
// differing fields, and the other top-level sections that differ. The
// version is not compared.
func Diff(from, to *snapshot.Config) model.Diff {
	d := model.Diff{Added: []string{}, Removed: []string{}, Changed: []model.RouteChange{}, Sections: []string{}}
	oldR, newR := map[string]snapshot.Route{}, map[string]snapshot.Route{}
	for _, r := range from.Routes {
		oldR[r.ID] = r
	}
	for _, r := range to.Routes {
		newR[r.ID] = r
		o, ok := oldR[r.ID]
		if !ok {
			d.Added = append(d.Added, r.ID)
		} else if fs := fieldChanges(o, r); len(fs) > 0 {
			d.Changed = append(d.Changed, model.RouteChange{ID: r.ID, Fields: fs})
		}
	}
	for _, r := range from.Routes {
		if _, ok := newR[r.ID]; !ok {
			d.Removed = append(d.Removed, r.ID)
		}
	}
	oldC, newC := map[string]snapshot.Cluster{}, map[string]bool{}
	for _, c := range from.Clusters {
		oldC[c.Name] = c
	}
	d.Clusters.Added, d.Clusters.Removed, d.Clusters.Changed = []string{}, []string{}, []string{}
	for _, c := range to.Clusters {
		newC[c.Name] = true
		if o, ok := oldC[c.Name]; !ok {
			d.Clusters.Added = append(d.Clusters.Added, c.Name)
		} else if !reflect.DeepEqual(o, c) {
			d.Clusters.Changed = append(d.Clusters.Changed, c.Name)
		}
	}
	for _, c := range from.Clusters {
		if !newC[c.Name] {
			d.Clusters.Removed = append(d.Clusters.Removed, c.Name)
		}
	}
	for _, s := range fieldChanges(sections(from), sections(to)) {
		d.Sections = append(d.Sections, s.Field)
	}
	for _, l := range [][]string{d.Added, d.Removed, d.Clusters.Added, d.Clusters.Removed, d.Clusters.Changed} {
		sort.Strings(l)
	}
	sort.Slice(d.Changed, func(i, j int) bool { return d.Changed[i].ID < d.Changed[j].ID })
	return d
}

// sections is the config without version, routes and clusters.
func sections(c *snapshot.Config) snapshot.Config {
	s := *c
	s.Version, s.Routes, s.Clusters = snapshot.Version{}, nil, nil
	return s
}

// fieldChanges compares two values field by field through their JSON
// encoding (the field names are the config's), returning differing
// top-level fields sorted by name.
func fieldChanges(a, b any) []model.FieldChange {
	ma, mb := asMap(a), asMap(b)
	var out []model.FieldChange
	for k, va := range ma {
		if vb, ok := mb[k]; !ok || !reflect.DeepEqual(va, vb) {
			out = append(out, model.FieldChange{Field: k, Old: va, New: mb[k]})
		}
	}
	for k, vb := range mb {
		if _, ok := ma[k]; !ok {
			out = append(out, model.FieldChange{Field: k, Old: nil, New: vb})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

func asMap(v any) map[string]any {
	data, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}
