package helm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

// TestConfigSchemaAcceptsTheShippedConfigs checks values.schema.json's
// "config" (generated from pkg/config's structs) against the configs the
// repository ships: config/hookinbox.yaml has every key, so a key the
// schema refused but the daemons accept would fail here. A typo must be
// refused with its path.
func TestConfigSchemaAcceptsTheShippedConfigs(t *testing.T) {
	t.Parallel()
	schema, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	validate := func(config map[string]any) error {
		vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		vals["existingSecret"], vals["config"] = "hookinbox", config
		return chartutil.ValidateAgainstSingleSchema(vals, schema)
	}
	for _, name := range []string{"hookinbox.yaml", "minimal.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../config", name))
		if err != nil {
			t.Fatal(err)
		}
		var config map[string]any
		if err := yaml.Unmarshal(data, &config); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := validate(config); err != nil {
			t.Errorf("config/%s is refused by values.schema.json: %v", name, err)
		}
		receiver, _ := config["receiver"].(map[string]any)
		if receiver == nil {
			receiver = map[string]any{}
			config["receiver"] = receiver
		}
		receiver["lisen"] = "0.0.0.0:8080"
		err = validate(config)
		if err == nil || !strings.Contains(err.Error(), "at '/config/receiver': additional properties 'lisen' not allowed") {
			t.Errorf("config/%s with receiver.lisen: want the typo refused at /config/receiver, got %v", name, err)
		}
	}
}
