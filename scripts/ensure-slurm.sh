#!/usr/bin/env bash
# Makes sure Debian's Slurm 22.05 (slurmrestd and the JWT plugin too), munge and MariaDB are installed for the tests that run a real Slurm
# (internal/slurmtest starts one per test under a temporary folder). One apt-get for all of them when any is missing.
set -euo pipefail
pkgs="slurmctld slurmd slurmdbd slurm-client slurmrestd slurm-wlm-jwt-plugin munge mariadb-server mariadb-client"
# The JWT plugin's library lies under an architecture's folder; its copyright file does not.
for bin in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/slurmdbd /usr/bin/sbatch /usr/sbin/munged /usr/sbin/slurmrestd \
	/usr/share/doc/slurm-wlm-jwt-plugin/copyright /usr/sbin/mariadbd /usr/bin/mariadb-install-db /usr/bin/mariadb; do
	[[ -e "$bin" ]] || exec "$(dirname "$0")/apt-ensure.sh" "$bin" "$pkgs" PATH
done
echo /usr/sbin/slurmctld
