# shellcheck shell=bash
# The workshop hub's own settings, read by hub/jupyterhub_config.py together with slurm_templates/site.sh
# (the partition, account, GPU types and modules come from there). Edit the values after `:=`; a value already
# set in the hub's environment wins (the hub test sets its loopback values that way). The admin page,
# chapters/hub-admin.md, says what each one is for.

# Where attendees reach the hub (JupyterHub's bind_url). Behind a TLS-terminating web server keep it on
# http; else give the certificate and its key (a file only the hub's user can read).
: "${GPU_PYTHON_HUB_BIND_URL:=http://:8000}"
: "${GPU_PYTHON_HUB_SSL_CERT:=}"
: "${GPU_PYTHON_HUB_SSL_KEY:=}"
# The hub's API, which the attendees' servers on the GPU nodes call: the address it listens on, its port,
# and the address the nodes reach it at (empty: this machine's host name).
: "${GPU_PYTHON_HUB_API_IP:=0.0.0.0}"
: "${GPU_PYTHON_HUB_API_PORT:=8081}"
: "${GPU_PYTHON_HUB_CONNECT_IP:=}"
# The configurable-http-proxy command (npm install -g configurable-http-proxy) and its API port on 127.0.0.1.
: "${GPU_PYTHON_HUB_PROXY:=configurable-http-proxy}"
: "${GPU_PYTHON_HUB_PROXY_API_PORT:=8001}"
# The hub's state: its database, pid files and secrets (cookie_secret, proxy_auth_token). A folder only the
# hub's user can write to; made on the first start.
: "${GPU_PYTHON_HUB_STATE:=/srv/gpu-python-hub}"
# Who logs in: the authenticator (an entry point name such as pam, ldapauthenticator or generic-oauth, or
# module.Class), the admins (space-separated user names; nobody else is an admin), and who may log in
# (user names and, with pam, Unix groups; empty both: only the admins).
: "${GPU_PYTHON_HUB_AUTHENTICATOR:=pam}"
: "${GPU_PYTHON_HUB_ADMINS:=}"
: "${GPU_PYTHON_HUB_USERS:=}"
: "${GPU_PYTHON_HUB_GROUPS:=}"
# The user environment on the GPU nodes: a virtual environment (or conda environment) with
# gpukit[lessons,lab,hub] and the CUDA extra the nodes' driver needs; its bin/ holds jupyterhub-singleuser
# and batchspawner-singleuser.
: "${GPU_PYTHON_HUB_USER_ENV:=/opt/gpu-python/user-env}"
# The PATH the servers' jobs start with (the user environment's bin/ goes first) and Slurm's commands are found on.
: "${GPU_PYTHON_HUB_PATH:=/usr/local/bin:/usr/bin:/bin}"
# The attendees' JupyterLab settings (labconfig/page_config.json switches the news pop-up off), as a path
# the GPU nodes see; empty: none (then copy jupyter-config/labconfig into the user environment's etc/jupyter).
: "${GPU_PYTHON_HUB_JUPYTER_CONFIG:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/jupyter-config}"
# What each server's job asks for: GPUs per GPU profile, CPUs, memory, time limit; the partition of the CPU-only
# profile (empty: GPU_PYTHON_PARTITION's), and a Slurm reservation for the workshop (empty: none).
: "${GPU_PYTHON_HUB_GPUS:=1}"
: "${GPU_PYTHON_HUB_CPUS:=4}"
: "${GPU_PYTHON_HUB_MEMORY:=16G}"
: "${GPU_PYTHON_HUB_RUNTIME:=04:00:00}"
: "${GPU_PYTHON_HUB_CPU_PARTITION:=}"
: "${GPU_PYTHON_HUB_RESERVATION:=}"
# The attendees' home folders as the GPU nodes see them, e.g. /home/{username}; empty: the account's home
# folder as this machine looks it up.
: "${GPU_PYTHON_HUB_HOME_TEMPLATE:=}"
# A Python config file of your own, loaded last (an OAuth or LDAP authenticator's settings, say); empty: none.
: "${GPU_PYTHON_HUB_EXTRA_CONFIG:=}"

export GPU_PYTHON_HUB_BIND_URL GPU_PYTHON_HUB_SSL_CERT GPU_PYTHON_HUB_SSL_KEY GPU_PYTHON_HUB_API_IP \
    GPU_PYTHON_HUB_API_PORT GPU_PYTHON_HUB_CONNECT_IP GPU_PYTHON_HUB_PROXY GPU_PYTHON_HUB_PROXY_API_PORT \
    GPU_PYTHON_HUB_STATE GPU_PYTHON_HUB_AUTHENTICATOR GPU_PYTHON_HUB_ADMINS GPU_PYTHON_HUB_USERS \
    GPU_PYTHON_HUB_GROUPS GPU_PYTHON_HUB_USER_ENV GPU_PYTHON_HUB_PATH GPU_PYTHON_HUB_JUPYTER_CONFIG \
    GPU_PYTHON_HUB_GPUS GPU_PYTHON_HUB_CPUS GPU_PYTHON_HUB_MEMORY GPU_PYTHON_HUB_RUNTIME \
    GPU_PYTHON_HUB_CPU_PARTITION GPU_PYTHON_HUB_RESERVATION GPU_PYTHON_HUB_HOME_TEMPLATE \
    GPU_PYTHON_HUB_EXTRA_CONFIG
