// Command gen-compose writes the docker-compose file of the multi-host
// test network: go run ./deploy/gen-compose -hosts 20 -o deploy/docker-compose.20.yml
// (the default, 5 hosts to deploy/docker-compose.yml, is the checked-in file).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/timed-project/timed/deploy/compose"
)

func main() {
	hosts := flag.Int("hosts", 5, "number of hosts (1 to 20)")
	out := flag.String("o", "deploy/docker-compose.yml", "output file; - for stdout")
	flag.Parse()
	if *hosts < 1 || *hosts > 20 {
		fmt.Fprintln(os.Stderr, "gen-compose: -hosts must be from 1 to 20")
		os.Exit(2)
	}
	data := compose.Generate(compose.Default(*hosts))
	if *out == "-" {
		_, err := os.Stdout.Write(data)
		if err != nil {
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen-compose:", err)
		os.Exit(1)
	}
}
