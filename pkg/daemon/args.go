package daemon

import (
	"errors"
	"flag"
	"strings"

	"github.com/hookinbox/hookinbox/pkg/config"
)

// ErrVersion is returned by Boot for --version given before the verb: Main
// then prints the binary's name and version (buildinfo.Version) and exits 0.
var ErrVersion = errors.New("version requested")

// parseArgs splits a binary's command line into the --config path and the
// rest: the verb (if any) followed by its own arguments. --config F,
// --config=F, -config F and -config=F are accepted before the verb and
// anywhere after it up to a "--", so `inboxctl --config F migrate` and
// `inboxctl migrate --config F` mean the same. Other flags before the verb
// are refused (-h prints the usage and returns flag.ErrHelp; --version
// returns ErrVersion); flags after it are the verb's.
func parseArgs(name string, args []string) (path string, rest []string, err error) {
	path, rest, err = SplitConfig(args)
	if err != nil {
		return "", nil, err
	}
	// What is left before the verb must be no flag at all; the FlagSet
	// refuses one and answers -h with the usage, which names --config.
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.String("config", "", "config file (default: $"+config.PathEnv+")")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(rest); err != nil {
		return "", nil, err
	}
	if *version {
		return "", nil, ErrVersion
	}
	return path, fs.Args(), nil
}

// configFlag reports whether arg is -config or --config, with its value when
// written as --config=F.
func configFlag(arg string) (value string, isConfig, inline bool) {
	if !strings.HasPrefix(arg, "-") {
		return "", false, false
	}
	name, value, inline := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-"), "=")
	return value, name == "config", inline
}

// SplitConfig takes every --config F (also --config=F, -config F,
// -config=F) out of a command line, before the verb or after it up to a
// "--", and returns its value and the rest. A CLI that parses its verbs
// itself (inboxctl, with cobra) calls it first and hands Boot the path.
// --config given twice, or without a value, is an error.
func SplitConfig(args []string) (path string, rest []string, err error) {
	given := false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		value, isConfig, inline := configFlag(arg)
		if !isConfig {
			rest = append(rest, arg)
			continue
		}
		if !inline {
			if i+1 == len(args) {
				return "", nil, errors.New("flag needs an argument: --config")
			}
			i++
			value = args[i]
		}
		if given {
			return "", nil, errors.New("--config given twice")
		}
		path, given = value, true
	}
	return path, rest, nil
}
