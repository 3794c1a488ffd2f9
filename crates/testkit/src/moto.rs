//! moto's S3 server for the S3 tests of `dlio-storage` and of the `dlio` binary: started on
//! 127.0.0.1 on a port it binds itself (`moto_server.py` prints it), stopped when dropped or
//! when the test process ends (it serves until its stdin closes). `scripts/test.sh` installs
//! moto (`pip install 'moto[server]' boto3`); a test that cannot start it fails, with moto's
//! own error output.
//!
//! moto accepts any credentials until [`Moto::require_authentication`] turns its IAM checks on.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;
/// Credentials for the server before it checks them (it accepts any).
pub const KEY_ID: &str = "AKIDLIOTESTKEY0001";
/// See [`KEY_ID`].
pub const SECRET: &str = "dlio-test-secret-value-0123456789";

/// A running moto server.
pub struct Moto {
    child: Child,
    /// Held open: the server exits when it closes.
    _stdin: ChildStdin,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The wrapper that binds its own port (see its docstring).
const SERVER: &str = include_str!("moto_server.py");

impl Moto {
    /// Starts the server and waits until it listens; panics with moto's stderr if it cannot
    /// (a missing moto is a failure of the suite's set-up, not a reason to skip).
    pub fn start() -> Moto {
        let stderr = tempfile::NamedTempFile::new().expect("a temp file for moto's stderr");
        let mut child = Command::new("python3")
            .args(["-c", SERVER])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr.reopen().expect("moto's stderr file"))
            .spawn()
            .unwrap_or_else(|e| panic!("python3 cannot be started for moto's server: {e}"));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        // The first line is the port; a server that fails prints nothing and exits.
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(line);
        });
        let line = receiver
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_default();
        let Ok(port) = line.trim().parse::<u16>() else {
            let _ = child.kill();
            let _ = child.wait();
            let mut said = String::new();
            let _ =
                std::fs::File::open(stderr.path()).and_then(|mut f| f.read_to_string(&mut said));
            panic!(
                "moto's S3 server did not start (scripts/test.sh installs it: pip install \
                 'moto[server]' boto3); it printed {line:?} and said:\n{said}"
            );
        };
        Moto {
            child,
            _stdin: stdin,
            endpoint: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Runs a Python `script` with boto3 clients `s3` and `iam` for this server (credentials
    /// [`KEY_ID`] / [`SECRET`]); returns its stdout. Fails the test if the script fails.
    pub fn boto3(&self, script: &str) -> String {
        let program = format!(
            "import boto3\n\
             kw = dict(endpoint_url='{}', region_name='us-east-1', \
             aws_access_key_id='{KEY_ID}', aws_secret_access_key='{SECRET}')\n\
             s3 = boto3.client('s3', **kw)\n\
             iam = boto3.client('iam', **kw)\n\
             {script}",
            self.endpoint
        );
        let output = Command::new("python3")
            .args(["-c", &program])
            .output()
            .expect("python3 runs");
        assert!(
            output.status.success(),
            "boto3 script failed:\n{script}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The objects under `prefix` in `bucket`, with their sizes, in key order.
    pub fn objects(&self, bucket: &str, prefix: &str) -> Vec<(String, u64)> {
        self.boto3(&format!(
            "r = s3.list_objects_v2(Bucket='{bucket}', Prefix='{prefix}')\n\
             for o in r.get('Contents', []): print(o['Key'], o['Size'])"
        ))
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(key, size)| (key.to_string(), size.parse().unwrap()))
        .collect()
    }

    /// Makes the server check every request's signature and permissions from now on, as a
    /// real S3 service does, and returns the only credentials it then accepts: an IAM user's
    /// access key id and secret, allowed `s3:*`. Checks that the server accepts them and
    /// refuses a wrong secret (boto3), so a test that sees a refusal knows it is the
    /// credentials'.
    ///
    /// moto's check has a limit: it recomputes the signature from the decoded query string,
    /// so it refuses every correctly signed request whose query holds an escaped `/`
    /// (`prefix=a%2F`, `delimiter=%2F`; botocore's requests too). Delimited listings, which
    /// dlio uses, therefore fail there even with the right secret: use this for tests of
    /// refused credentials only.
    pub fn require_authentication(&self) -> (String, String) {
        let out = self.boto3(
            "import json, urllib.request\n\
             from botocore.exceptions import ClientError\n\
             iam.create_user(UserName='dlio')\n\
             policy = {'Version': '2012-10-17', 'Statement': [{'Effect': 'Allow', \
             'Action': 's3:*', 'Resource': '*'}]}\n\
             iam.put_user_policy(UserName='dlio', PolicyName='s3', \
             PolicyDocument=json.dumps(policy))\n\
             key = iam.create_access_key(UserName='dlio')['AccessKey']\n\
             urllib.request.urlopen(urllib.request.Request(kw['endpoint_url'] + \
             '/moto-api/reset-auth', data=b'0', headers={'Content-Type': 'text/plain'}))\n\
             def client(secret):\n    \
                 return boto3.client('s3', endpoint_url=kw['endpoint_url'], \
             region_name='us-east-1', aws_access_key_id=key['AccessKeyId'], \
             aws_secret_access_key=secret)\n\
             client(key['SecretAccessKey']).list_buckets()\n\
             try:\n    \
                 client(key['SecretAccessKey'] + 'x').list_buckets()\n    \
                 raise SystemExit('moto accepted a wrong secret')\n\
             except ClientError as e:\n    \
                 assert e.response['Error']['Code'] == 'SignatureDoesNotMatch', e\n\
             print(key['AccessKeyId'], key['SecretAccessKey'])",
        );
        let mut words = out.split_whitespace();
        match (words.next(), words.next()) {
            (Some(id), Some(secret)) => (id.to_owned(), secret.to_owned()),
            _ => panic!("no access key from moto: {out}"),
        }
    }
}
