package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

// runProfiled runs the receiver or the worker exactly as cmd/receiver and
// cmd/worker wire them (daemon.Boot, then daemon.RunReceiver or
// daemon.RunWorker with the built-in handlers), writing a CPU profile of
// the whole run to --cpuprofile. It is how hookbench profiles them without
// a pprof endpoint in the product binaries.
func runProfiled(ctx context.Context, mode string, args []string) error {
	fs := flag.NewFlagSet("hookbench "+mode, flag.ContinueOnError)
	profile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	configPath := fs.String("config", "", "config file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	bootArgs := []string{"--config", *configPath}
	switch mode {
	case "receiver":
		env, _, err := daemon.Boot(ctx, &daemon.BootConfig{Name: "receiver", Args: bootArgs, Verbs: daemon.Verbs{"": config.NeedReceiver}})
		if err != nil {
			return err
		}
		defer env.Close()
		return daemon.RunReceiver(ctx, env)
	case "worker":
		env, _, err := daemon.Boot(ctx, &daemon.BootConfig{Name: "worker", Args: bootArgs, Verbs: daemon.Verbs{"": config.NeedWorker}})
		if err != nil {
			return err
		}
		defer env.Close()
		return daemon.RunWorker(ctx, env, nil)
	}
	return fmt.Errorf("unknown mode %q", mode)
}
