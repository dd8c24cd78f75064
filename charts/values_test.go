package charts_test

import (
	"encoding/json"
	"fmt"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// valuesTable makes one row per value of values.yaml that has a "# --"
// comment: its path, its default as JSON, and the comment. A map without
// such a comment is walked into; any other value without one is an error,
// so every value is documented.
func valuesTable(values []byte) ([]string, error) {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(values, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml3.MappingNode {
		return nil, fmt.Errorf("values.yaml: not a map")
	}
	var rows []string
	var walk func(prefix string, m *yaml3.Node) error
	walk = func(prefix string, m *yaml3.Node) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			path := prefix + k.Value
			desc, ok := describe(k.HeadComment)
			if !ok {
				if v.Kind == yaml3.MappingNode && len(v.Content) > 0 {
					if err := walk(path+".", v); err != nil {
						return err
					}
					continue
				}
				return fmt.Errorf("values.yaml: %s has no \"# --\" comment", path)
			}
			var val any
			if err := v.Decode(&val); err != nil {
				return fmt.Errorf("values.yaml: %s: %w", path, err)
			}
			def, err := json.Marshal(val)
			if err != nil {
				return fmt.Errorf("values.yaml: %s: %w", path, err)
			}
			rows = append(rows, fmt.Sprintf("| `%s` | `%s` | %s |", path, def, strings.ReplaceAll(desc, "|", `\|`)))
		}
		return nil
	}
	return rows, walk("", doc.Content[0])
}

// describe returns the text of the last "# --" comment block of a key's
// head comment, as one line.
func describe(head string) (string, bool) {
	i := strings.LastIndex(head, "# -- ")
	if i < 0 {
		return "", false
	}
	var words []string
	for _, l := range strings.Split(head[i+len("# -- "):], "\n") {
		words = append(words, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#")))
	}
	return strings.Join(words, " "), true
}
