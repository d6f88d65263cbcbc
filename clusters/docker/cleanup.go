package docker

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
)

// Cleanup removes every container (with its anonymous volumes), volume and
// network labelled with run id, and says what it removed. `locktest
// cleanup` calls it for runs whose harness is gone.
func Cleanup(ctx context.Context, runID string) ([]string, error) {
	if strings.TrimSpace(runID) == "" {
		return nil, errors.New("cleanup: empty run id")
	}
	cli, err := Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var did []string
	var errs []error
	f := runFilter(runID)
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs {
		name := strings.TrimPrefix(strings.Join(c.Names, ","), "/")
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", name, err))
			continue
		}
		did = append(did, "removed container "+name)
	}
	vs, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err == nil {
		for _, v := range vs.Volumes {
			if err := cli.VolumeRemove(ctx, v.Name, true); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
				continue
			}
			did = append(did, "removed volume "+v.Name)
		}
	}
	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return did, errors.Join(append(errs, fmt.Errorf("list networks: %w", err))...)
	}
	for _, n := range ns {
		if err := cli.NetworkRemove(ctx, n.ID); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
			continue
		}
		did = append(did, "removed network "+n.Name)
	}
	return did, errors.Join(errs...)
}

// Leftovers counts the containers and networks labelled with run id (for
// tests and `locktest doctor`).
func Leftovers(ctx context.Context, runID string) (containers, networks int, err error) {
	cli, err := Connect(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: runFilter(runID)})
	if err != nil {
		return 0, 0, err
	}
	ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: runFilter(runID)})
	if err != nil {
		return 0, 0, err
	}
	return len(cs), len(ns), nil
}

// HealContainers undoes what a crashed run's faults left on containers it
// did not create (a compose stack): it thaws paused ones, starts stopped
// ones and empties the filter table inside each one's network namespace
// (the partition rules; Docker puts none there).
func HealContainers(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cli, err := Connect(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var did []string
	var errs []error
	for _, id := range ids {
		info, err := cli.ContainerInspect(ctx, id)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		name := strings.TrimPrefix(info.Name, "/")
		switch {
		case info.State.Paused:
			if err := cli.ContainerUnpause(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("unpause %s: %w", name, err))
				continue
			}
			did = append(did, "unpaused "+name)
		case !info.State.Running:
			if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
				errs = append(errs, fmt.Errorf("start %s: %w", name, err))
				continue
			}
			did = append(did, "started "+name)
		}
		if info, err = cli.ContainerInspect(ctx, id); err != nil || info.State.Pid == 0 {
			continue
		}
		cmd := exec.CommandContext(ctx, "nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", info.State.Pid), "iptables-restore")
		cmd.Stdin = strings.NewReader("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("clear partition rules in %s: %v: %s", name, err, strings.TrimSpace(string(out))))
			continue
		}
		did = append(did, "cleared partition rules in "+name)
	}
	return did, errors.Join(errs...)
}
