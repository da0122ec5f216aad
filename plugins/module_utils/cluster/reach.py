# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The first contact with a cluster's API server, bounded in time.

The kubernetes client waits for an answer without a limit: a server that
accepts the connection and never answers (a black hole, a stalled proxy, an
API server too loaded to answer) held every playbook at its first task for
as long as anyone waited. reach() asks the server for its version (the one
call every API server answers, to anyone) with a limit on the whole request
and no retries, and says in one line what happened and what to do next.

The client configuration is built exactly as kubernetes.core's modules build
theirs (kubeconfig and context, K8S_AUTH_* variables, or the pod's own
service account), so what is reached here is what the playbook's later
tasks reach.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket
import ssl
import time

from ..common.errors import MlinfraError

try:
    import urllib3
    from kubernetes import client as k8s_client
    from kubernetes.client.rest import ApiException
    from kubernetes.config import ConfigException
    HAS_KUBERNETES = True
except ImportError:  # reported by AnsibleK8SModule, which needs the library too
    HAS_KUBERNETES = False


class ReachError(MlinfraError):
    """The API could not be reached; the message says why and what to do."""


def configuration(auth):
    """The kubernetes client's Configuration from kubernetes.core's auth
    options (a mapping such as a module's params)."""
    # kubernetes.core's own helpers, so that the same kubeconfig, context,
    # environment variables and in-cluster account are used as by its
    # modules; they make no request.
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s import client as core_client
    try:
        return core_client._create_configuration(  # pylint: disable=protected-access
            core_client._create_auth_spec(**auth))  # pylint: disable=protected-access
    except (ConfigException, IOError, OSError, ValueError, TypeError) as err:
        raise ReachError("no usable kubeconfig: %s" % (str(err) or err.__class__.__name__))


def _cause(err):
    """The innermost reason of a urllib3 error, for the message."""
    reason = getattr(err, "reason", None)
    while getattr(reason, "reason", None) is not None and reason is not reason.reason:
        reason = reason.reason
    return reason or err


def reach(config, timeout):
    """{"server", "version", "seconds"} of the API server behind config, or
    ReachError within about ``timeout`` seconds."""
    server = config.host
    config.retries = 0
    api = k8s_client.VersionApi(k8s_client.ApiClient(config))
    began = time.monotonic()
    try:
        # The answer as JSON, not the client's model of it, which refuses a
        # server that leaves out one of its fields.
        answer = api.get_code(_request_timeout=timeout, _preload_content=False)
        version = json.loads(answer.data.decode("utf-8")).get("gitVersion")
    except ValueError as err:
        raise ReachError("the API server at %s answered its version with no JSON (%s): is this a Kubernetes "
                         "API server?" % (server, err))
    except ApiException as err:
        if err.status in (401, 403):
            raise ReachError("the API server at %s answered %s %s: the credentials were refused; log in again "
                             "(oc login, or a new token in the kubeconfig)" % (server, err.status, err.reason))
        raise ReachError("the API server at %s answered %s %s to a request for its version: is this a Kubernetes "
                         "API server?" % (server, err.status, err.reason))
    except (urllib3.exceptions.HTTPError, socket.error, ssl.SSLError) as err:
        cause = _cause(err)
        seconds = time.monotonic() - began
        # Before the time-out: urllib3's NewConnectionError (a refusal) is a
        # ConnectTimeoutError by its class.
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
            raise ReachError("the API server at %s refused the connection: is it running, and is the "
                             "kubeconfig's server address right?" % server)
        if isinstance(cause, (socket.timeout, urllib3.exceptions.TimeoutError)) or seconds >= timeout:
            raise ReachError("the API server at %s did not answer within %s s (cluster_api_timeout): is it up, "
                             "reachable from here (VPN, proxy, firewall) and not overloaded? Raise "
                             "cluster_api_timeout for a slow one" % (server, timeout))
        if isinstance(cause, ssl.SSLError) or "ssl" in str(cause).lower() or "certificate" in str(cause).lower():
            raise ReachError("the TLS connection to %s failed (%s): check the kubeconfig's certificate "
                             "authority" % (server, cause))
        raise ReachError("cannot reach the API server at %s: %s" % (server, cause))
    return {"server": server, "version": version, "seconds": round(time.monotonic() - began, 3)}


def namespace_exists(config, namespace, timeout):
    """Whether ``namespace`` exists, read within ``timeout`` seconds once
    reach() has answered: the roles need to know (a server-side dry run of
    a namespaced object fails while its namespace does not exist), and the
    same client asks in the same module run instead of a k8s_info of its own."""
    api = k8s_client.CoreV1Api(k8s_client.ApiClient(config))
    try:
        api.read_namespace(namespace, _request_timeout=timeout, _preload_content=False)
    except ApiException as err:
        if err.status == 404:
            return False
        if err.status in (401, 403):
            raise ReachError("the API server at %s answered %s %s to a read of namespace %s: the credentials may "
                             "not read namespaces; log in as a user who can (oc login), or ask for get on "
                             "namespaces" % (config.host, err.status, err.reason, namespace))
        raise ReachError("the API server at %s answered %s %s to a read of namespace %s"
                         % (config.host, err.status, err.reason, namespace))
    except (urllib3.exceptions.HTTPError, socket.error, ssl.SSLError) as err:
        raise ReachError("the API server at %s answered its version but not a read of namespace %s within %s s "
                         "(%s): is it overloaded? Raise cluster_api_timeout for a slow one"
                         % (config.host, namespace, timeout, _cause(err)))
    return True
