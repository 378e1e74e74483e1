package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

const fieldManager = "hookinbox-kube-test"

type clients struct {
	typed   *kubernetes.Clientset
	dynamic *dynamic.DynamicClient
	mapper  *restmapper.DeferredDiscoveryRESTMapper
}

func newClients(kubeconfig string) (*clients, error) {
	if kubeconfig == "" {
		return nil, errors.New("no kubeconfig: pass -kubeconfig or set KUBECONFIG")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.WarningHandler = rest.NoWarnings{}
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{typed: typed, dynamic: dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))}, nil
}

// poll calls cond every 200ms until it reports done, returns an error, or ctx ends; on
// timeout the error names what was awaited and the last reason cond gave.
func poll(ctx context.Context, what string, cond func(context.Context) (bool, string, error)) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		done, why, err := cond(ctx)
		last = why
		return done, err
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("timed out waiting for %s (last: %s)", what, last)
	}
	return err
}

func cmdReady(ctx context.Context, cl *clients) error {
	return poll(ctx, "the API server's /readyz", func(ctx context.Context) (bool, string, error) {
		body, err := cl.typed.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return string(body) == "ok", string(body), nil
	})
}

// readObjects decodes every non-empty YAML or JSON document of the files ("-" is stdin).
func readObjects(files []string) ([]*unstructured.Unstructured, error) {
	if len(files) == 0 {
		return nil, errors.New("no manifest files given")
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		var data []byte
		var err error
		if f == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(f)
		}
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for i := 0; ; i++ {
			var m map[string]any
			if err := dec.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", f, i+1, err)
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if u.GetKind() == "" || u.GetAPIVersion() == "" {
				return nil, fmt.Errorf("%s: document %d has no kind or apiVersion", f, i+1)
			}
			objs = append(objs, u)
		}
	}
	return objs, nil
}

// resourceFor maps obj to its REST resource, giving a namespaced object without a
// namespace the default one.
func (cl *clients) resourceFor(obj *unstructured.Unstructured, namespace string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := cl.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk, obj.GetName(), err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return cl.dynamic.Resource(m.Resource), nil
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(namespace)
	}
	return cl.dynamic.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
}

func describe(obj *unstructured.Unstructured) string {
	s := obj.GetKind() + "/" + obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		s = ns + "/" + s
	}
	return s
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// cmdApply server-side applies every object in order; after a CRD it waits until the CRD is
// Established and forgets the discovery cache, so a later document may use the new kind.
func cmdApply(ctx context.Context, cl *clients, namespace string, files []string) error {
	objs, err := readObjects(files)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		res, err := cl.resourceFor(obj, namespace)
		if err != nil {
			return err
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		if _, err := res.Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: fieldManager, Force: &force}); err != nil {
			return fmt.Errorf("apply %s: %w", describe(obj), err)
		}
		fmt.Printf("applied %s\n", describe(obj))
		if obj.GetKind() == "CustomResourceDefinition" {
			if err := waitEstablished(ctx, cl, obj.GetName()); err != nil {
				return err
			}
			cl.mapper.Reset()
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, cl *clients, name string) error {
	return poll(ctx, "CRD "+name+" to be Established", func(ctx context.Context) (bool, string, error) {
		crd, err := cl.dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, "", nil
			}
		}
		return false, "not Established", nil
	})
}

// cmdDryRun sends every object as a create with dryRun=All and fieldValidation=Strict: the
// API server runs defaulting, validation (a CRD's schema included), admission and the
// strict unknown/duplicate field check, and stores nothing. Every failure is reported
// before the command fails.
func cmdDryRun(ctx context.Context, cl *clients, namespace string, files []string) error {
	objs, err := readObjects(files)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return errors.New("no objects to check")
	}
	var failed []string
	for _, obj := range objs {
		res, err := cl.resourceFor(obj, namespace)
		if err == nil {
			_, err = res.Create(ctx, obj, metav1.CreateOptions{
				DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict", FieldManager: fieldManager})
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", describe(obj), err))
			fmt.Printf("REJECTED %s: %v\n", describe(obj), err)
			continue
		}
		fmt.Printf("accepted %s\n", describe(obj))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d objects rejected:\n  %s", len(failed), len(objs), strings.Join(failed, "\n  "))
	}
	fmt.Printf("dry-run: all %d objects accepted (fieldValidation=Strict)\n", len(objs))
	return nil
}
