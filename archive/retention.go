package archive

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Expire removes every archive last written or restored before
// now-maxAge (maxAge <= 0 removes nothing). It returns what it removed and
// the errors it met without stopping.
func Expire(ctx context.Context, s Store, maxAge time.Duration, now time.Time) ([]Info, error) {
	if maxAge <= 0 {
		return nil, nil
	}
	all, err := s.List(ctx, "")
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-maxAge)
	var removed []Info
	var errs []error
	for _, a := range all {
		if !a.ModTime.Before(cutoff) {
			continue
		}
		if err := s.Delete(ctx, a.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, a)
	}
	return removed, errors.Join(errs...)
}

// Trim keeps owner's archives within maxBytes by removing the oldest first
// (an archive alone larger than maxBytes goes too: a budget is never
// exceeded). maxBytes <= 0 removes nothing.
func Trim(ctx context.Context, s Store, owner string, maxBytes int64) ([]Info, error) {
	if maxBytes <= 0 {
		return nil, nil
	}
	if owner == "" {
		// "" lists every owner: one caller's budget must never remove
		// another's archives.
		return nil, fmt.Errorf("archive: trim: no owner")
	}
	all, err := s.List(ctx, owner)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, a := range all {
		total += a.Size
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].ModTime.Equal(all[j].ModTime) {
			return all[i].ModTime.Before(all[j].ModTime)
		}
		return all[i].Key.Name < all[j].Key.Name
	})
	var removed []Info
	var errs []error
	for _, a := range all {
		if total <= maxBytes {
			break
		}
		if err := s.Delete(ctx, a.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		total -= a.Size
		removed = append(removed, a)
	}
	return removed, errors.Join(errs...)
}
