#!/usr/bin/env bash
# Make sure the real peers the tests and the demo need are installed and answering:
# RabbitMQ (127.0.0.1:5672, guest/guest), PostgreSQL (127.0.0.1:5432, trust auth, user root) and
# MariaDB (127.0.0.1:3306 and /run/mysqld/mysqld.sock, user root with an empty password),
# plus the tools the tests run but do not keep running: Prometheus (prometheus, promtool: the
# alert rules' tests and a real scrape) and systemd-analyze (the unit's verify).
# Installs them with apt where missing, starts the servers where stopped. Idempotent.
set -euo pipefail

answers() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
wait_port() {
    local port=$1 name=$2
    for _ in $(seq 1 90); do answers "$port" && return 0; sleep 1; done
    echo "services: $name did not start answering on 127.0.0.1:$port" >&2
    return 1
}
apt_updated=0
apt_install() {
    if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# --- PostgreSQL -----------------------------------------------------------
if ! answers 5432; then
    if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
        echo "services: installing PostgreSQL"
        apt_install postgresql
    fi
    ver=$(ls /etc/postgresql | sort -V | tail -n 1)
    conf=/etc/postgresql/$ver/main
    # Loopback trust auth and TCP on 127.0.0.1, as the project's machines have it.
    if ! grep -q '^host all all 127.0.0.1/32 trust' "$conf/pg_hba.conf"; then
        sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$conf/pg_hba.conf"
    fi
    grep -q "^listen_addresses" "$conf/postgresql.conf" || echo "listen_addresses = '127.0.0.1'" >> "$conf/postgresql.conf"
    echo "services: starting PostgreSQL $ver"
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
    wait_port 5432 PostgreSQL
fi
if ! psql -h 127.0.0.1 -U root -d postgres -Atc 'select 1' >/dev/null 2>&1; then
    su postgres -c "psql -Atc \"CREATE ROLE root SUPERUSER LOGIN\"" >/dev/null 2>&1 || true
fi
# make test's integration phase runs two test files at once (pytest-xdist), each with stacks that
# keep pools (nova's control plane, Placement, several asyncsched daemons): PostgreSQL's default
# 100 connections can run out. Raised to 300 (max_connections needs a restart), only while no
# other client is connected, so suites already running on a shared machine are not cut off.
pg_q() { psql -h 127.0.0.1 -U root -d postgres -Atc "$1"; }
if [ "$(pg_q 'SHOW max_connections')" -lt 300 ]; then
    others=$(pg_q "SELECT count(*) FROM pg_stat_activity
                   WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
    if [ "$others" = 0 ]; then
        echo "services: PostgreSQL max_connections = 300 (restarting it)"
        pg_q 'ALTER SYSTEM SET max_connections = 300' >/dev/null
        pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main restart
        wait_port 5432 PostgreSQL
        for _ in $(seq 1 30); do pg_q 'SELECT 1' >/dev/null 2>&1 && break; sleep 1; done
    else
        echo "services: PostgreSQL keeps max_connections = $(pg_q 'SHOW max_connections'):" \
            "$others other clients connected (make test TEST_WORKERS=0 if it runs out)" >&2
    fi
fi
psql -h 127.0.0.1 -U root -d postgres -Atc 'select 1' >/dev/null

# --- MariaDB --------------------------------------------------------------
# Debian's mariadb-server, as most clouds keep nova's and Placement's databases (issue #25).
# No systemd here: mysqld_safe in the background, as Debian's SysV script starts it. root gets
# an empty password over TCP (root@127.0.0.1) and the socket (root@localhost, unix_socket OR
# password), as this project's machines have it; a Debian install gives root the socket only.
MYSQL_SOCK=/run/mysqld/mysqld.sock
maria_root() { mariadb --protocol=socket -S "$MYSQL_SOCK" -uroot "$@"; }
if ! answers 3306; then
    if ! command -v mariadbd >/dev/null 2>&1; then
        echo "services: installing MariaDB"
        apt_install mariadb-server
    fi
    # A Debian install reads /etc/mysql/mariadb.conf.d/ (bind-address 127.0.0.1 already); the
    # options the tests rely on go in a drop-in of ours. A my.cnf without that folder is kept.
    if [ -d /etc/mysql/mariadb.conf.d ] && [ ! -f /etc/mysql/mariadb.conf.d/90-asyncsched.cnf ]; then
        printf '%s\n' '[mysqld]' 'bind-address = 127.0.0.1' 'port = 3306' 'skip-name-resolve' \
            'character-set-server = utf8mb4' 'collation-server = utf8mb4_general_ci' \
            'max_connections = 500' > /etc/mysql/mariadb.conf.d/90-asyncsched.cnf
    fi
    if [ ! -d /var/lib/mysql/mysql ]; then
        echo "services: initialising MariaDB's data directory"
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    fi
    install -m 755 -o mysql -g root -d /run/mysqld
    echo "services: starting MariaDB"
    (setsid mysqld_safe >/dev/null 2>&1 < /dev/null &)
    wait_port 3306 MariaDB
fi
for _ in $(seq 1 30); do
    maria_root -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 1
done
if ! mariadb -h 127.0.0.1 -P 3306 -uroot -e 'SELECT 1' >/dev/null 2>&1 \
    || ! mariadb --protocol=socket -S "$MYSQL_SOCK" -uroot --password= -e 'SELECT 1' >/dev/null 2>&1; then
    echo "services: MariaDB root with an empty password over 127.0.0.1 and the socket"
    maria_root <<'SQL'
ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
FLUSH PRIVILEGES;
SQL
fi
# nova's control plane, Placement and asyncsched each keep pools: 151 (the default) runs out
# when several suites run side by side. Raised at run time too (a running server keeps it).
if [ "$(mariadb -h 127.0.0.1 -uroot -N -e 'SELECT @@max_connections')" -lt 500 ]; then
    mariadb -h 127.0.0.1 -uroot -e 'SET GLOBAL max_connections = 500'
fi
mariadb -h 127.0.0.1 -uroot -e 'SELECT 1' >/dev/null

# --- RabbitMQ -------------------------------------------------------------
if ! answers 5672; then
    if ! command -v rabbitmq-server >/dev/null 2>&1; then
        echo "services: installing RabbitMQ"
        apt_install rabbitmq-server
    fi
    echo "services: starting RabbitMQ"
    rabbitmq-server -detached || true
    wait_port 5672 RabbitMQ
fi
# The broker accepts AMQP a little after the port opens; wait for a real handshake.
for _ in $(seq 1 60); do
    rabbitmqctl -q status >/dev/null 2>&1 && break
    sleep 1
done
echo "services: PostgreSQL, MariaDB and RabbitMQ are answering"

# --- Tools (installed, never started here) --------------------------------
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
    echo "services: installing Prometheus (prometheus, promtool)"
    apt_install prometheus
fi
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "services: installing systemd's tools (systemd-analyze)"
    apt_install systemd
fi
