package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func cmdWaitNodes(ctx context.Context, cl *clients, args []string) error {
	if len(args) != 1 {
		return errors.New("want one argument: how many Ready nodes")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	return poll(ctx, args[0]+" Ready nodes", func(ctx context.Context) (bool, string, error) {
		nodes, err := cl.typed.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= want, fmt.Sprintf("%d of %d nodes Ready", ready, len(nodes.Items)), nil
	})
}

func cmdWaitServiceAccount(ctx context.Context, cl *clients, namespace string, args []string) error {
	if len(args) != 1 {
		return errors.New("want one argument: the ServiceAccount's name")
	}
	return poll(ctx, "ServiceAccount "+namespace+"/"+args[0], func(ctx context.Context) (bool, string, error) {
		_, err := cl.typed.CoreV1().ServiceAccounts(namespace).Get(ctx, args[0], metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// resourceVersion reads an object's resourceVersion as the etcd revision of its last
// write. The API calls it opaque; with one etcd behind the API server, as here, it is that
// revision, and revisions order every write in the cluster, across resources.
func resourceVersion(o metav1.Object) (uint64, error) {
	rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: resourceVersion %q is not an etcd revision", o.GetName(), o.GetResourceVersion())
	}
	return rv, nil
}

// cmdHookOrder watches Jobs and Deployments in namespace from now on. It records the write
// (etcd revision) that marked a Helm hook Job for phase ("pre-install" or "pre-upgrade")
// Complete, and the first write that created a Deployment (install) or changed one's spec
// (upgrade: metadata.generation above the one listed at the start). It succeeds when both
// are seen and the Job's completion came first; a Deployment written first fails at once
// once the Job's completion shows it later, and a timeout fails too. It prints "watching"
// when its watches are open, so the caller starts Helm only then.
func cmdHookOrder(ctx context.Context, cl *clients, namespace, phase string) error {
	if phase != "install" && phase != "upgrade" {
		return fmt.Errorf("-phase %q: want install or upgrade", phase)
	}
	hook := "pre-" + phase
	deps, err := cl.typed.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	baseline := map[string]int64{}
	for _, d := range deps.Items {
		baseline[d.Name] = d.Generation
	}
	jobs, err := cl.typed.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	dw, err := cl.typed.AppsV1().Deployments(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: deps.ResourceVersion})
	if err != nil {
		return err
	}
	defer dw.Stop()
	jw, err := cl.typed.BatchV1().Jobs(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: jobs.ResourceVersion})
	if err != nil {
		return err
	}
	defer jw.Stop()
	fmt.Println("watching")

	var jobRV, depRV uint64
	var jobName, depWhat string
	for jobRV == 0 || depRV == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out: hook Job complete at revision %d (%s), Deployment %s at revision %d",
				jobRV, jobName, depWhat, depRV)
		case ev, ok := <-jw.ResultChan():
			if !ok {
				return errors.New("the Job watch closed")
			}
			j, isJob := ev.Object.(*batchv1.Job)
			if !isJob || jobRV != 0 || !hasHook(j.Annotations, hook) || !jobComplete(j) {
				continue
			}
			if jobRV, err = resourceVersion(j); err != nil {
				return err
			}
			jobName = j.Name
			fmt.Printf("hook Job %s (%s) complete at revision %d\n", j.Name, hook, jobRV)
		case ev, ok := <-dw.ResultChan():
			if !ok {
				return errors.New("the Deployment watch closed")
			}
			d, isDep := ev.Object.(*appsv1.Deployment)
			if !isDep || depRV != 0 || ev.Type == watch.Deleted {
				continue
			}
			gen, known := baseline[d.Name]
			if known && d.Generation <= gen {
				continue
			}
			if depRV, err = resourceVersion(d); err != nil {
				return err
			}
			depWhat = fmt.Sprintf("%s %s (generation %d)", d.Name, strings.ToLower(string(ev.Type)), d.Generation)
			fmt.Printf("Deployment %s at revision %d\n", depWhat, depRV)
		}
	}
	if jobRV >= depRV {
		return fmt.Errorf("Deployment %s at revision %d before hook Job %s completed at revision %d",
			depWhat, depRV, jobName, jobRV)
	}
	fmt.Printf("ok: hook Job %s completed (revision %d) before Deployment %s (revision %d)\n",
		jobName, jobRV, depWhat, depRV)
	return nil
}

func hasHook(annotations map[string]string, hook string) bool {
	for h := range strings.SplitSeq(annotations["helm.sh/hook"], ",") {
		if strings.TrimSpace(h) == hook {
			return true
		}
	}
	return false
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
