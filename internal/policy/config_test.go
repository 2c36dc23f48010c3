package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	wantA := [NumLevels]uint64{2 << 20, 8 << 20, 32 << 20, 128 << 20}
	if c.Allowances != wantA {
		t.Errorf("Allowances = %v, want %v (paper Table 1)", c.Allowances, wantA)
	}
	if want := [NumLevels]uint16{1000, 500, 250, 100}; c.Weights != want {
		t.Errorf("Weights = %v, want %v", c.Weights, want)
	}
	if c.BoostAfter != 30*time.Second {
		t.Errorf("BoostAfter = %v, want 30s", c.BoostAfter)
	}
	for l, w := range map[Level]uint16{LevelNone: 0, Level1: 1000, Level4: 100, 5: 0} {
		if got := c.Weight(l); got != w {
			t.Errorf("Weight(%v) = %d, want %d", l, got, w)
		}
	}
	if got := c.Allowance(Level3); got != 32*MiB {
		t.Errorf("Allowance(3) = %d", got)
	}
	if got := c.Allowance(LevelNone); got != 0 {
		t.Errorf("Allowance(none) = %d", got)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*Config)
		// want lists a substring for each expected error, in order.
		want []string
	}{
		{"default", func(*Config) {}, nil},
		{"equal weights allowed", func(c *Config) { c.Weights = [4]uint16{500, 500, 500, 500} }, nil},
		{"decreasing allowances allowed", func(c *Config) { c.Allowances = [4]uint64{8, 4, 2, 1} }, nil},
		{"bounds inclusive", func(c *Config) { c.Weights = [4]uint16{1000, 10, 10, 10} }, nil},
		{"zero allowance", func(c *Config) { c.Allowances[1] = 0 },
			[]string{"Allowances[1]=0: level 2 allowance must be > 0"}},
		{"weight too low", func(c *Config) { c.Weights[3] = 9 },
			[]string{"Weights[3]=9: level 4 weight must be in 10..1000"}},
		{"weight too high", func(c *Config) { c.Weights[0] = 1001 },
			[]string{"Weights[0]=1001: level 1 weight must be in 10..1000"}},
		{"weight increases", func(c *Config) { c.Weights[2] = 600 },
			[]string{"Weights[2]=600: level 3 weight is greater than level 2 weight 500"}},
		{"boost zero", func(c *Config) { c.BoostAfter = 0 },
			[]string{"BoostAfter=0s: must be > 0"}},
		{"boost negative", func(c *Config) { c.BoostAfter = -time.Second },
			[]string{"BoostAfter=-1s: must be > 0"}},
		{"every problem reported", func(c *Config) {
			*c = Config{Weights: [4]uint16{0, 100, 200, 5000}}
		}, []string{
			"Allowances[0]=0", "Allowances[1]=0", "Allowances[2]=0", "Allowances[3]=0",
			"Weights[0]=0", "Weights[2]=200: level 3 weight is greater", "Weights[3]=5000",
			"BoostAfter=0s",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			var errs []error
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			if len(errs) != len(tt.want) {
				t.Fatalf("Validate() gave %d errors, want %d:\n%v", len(errs), len(tt.want), err)
			}
			for i, e := range errs {
				var fe *FieldError
				if !errors.As(e, &fe) {
					t.Errorf("error %d %v is not a *FieldError", i, e)
				}
				if !strings.Contains(e.Error(), tt.want[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, e, tt.want[i])
				}
			}
			if _, err := New(c); err == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
}
