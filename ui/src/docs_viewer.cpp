// MainWindow's Help menu: the README rendered in a window of the application (F1), where the
// README is, and the About text.
#include <QCoreApplication>
#include <QDialog>
#include <QDir>
#include <QFileInfo>
#include <QPushButton>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

#include "main_window.h"
#include "snip/isa.h"

namespace snip::ui {

void MainWindow::show_documentation() {
  const QString readme = readme_path();
  if (readme.isEmpty()) {
    show_message(MessageLevel::warning, tr("The README was not installed with this copy"));
    return;
  }
  // In the application: no browser or Markdown viewer is needed. Links to the other documents
  // (docs/*.md) open in the same window; web links in the desktop's browser, where there is one.
  if (!docs_window_) {
    docs_window_ = new QDialog(this, Qt::Window);
    docs_window_->setWindowTitle(tr("SNIP Workbench — documentation"));
    docs_window_->resize(900, 700);
    auto* browser = new QTextBrowser(docs_window_);
    browser->setObjectName(QStringLiteral("documentation"));
    browser->setOpenExternalLinks(true);
    auto* back = new QPushButton(tr("Back"), docs_window_);
    connect(back, &QPushButton::clicked, browser, &QTextBrowser::backward);
    connect(browser, &QTextBrowser::backwardAvailable, back, &QPushButton::setEnabled);
    back->setEnabled(false);
    auto* layout = new QVBoxLayout(docs_window_);
    layout->addWidget(back, 0, Qt::AlignLeft);
    layout->addWidget(browser, 1);
    browser->setSource(QUrl::fromLocalFile(readme), QTextDocument::MarkdownResource);
  }
  docs_window_->show();
  docs_window_->raise();
  docs_window_->activateWindow();
}

QString MainWindow::readme_path() {
  const QString installed = QDir(QCoreApplication::applicationDirPath())
                                .absoluteFilePath(QStringLiteral("../share/doc/snip-workbench/README.md"));
  for (const QString& candidate : {installed, QStringLiteral(SNIP_SOURCE_DIR "/README.md")})
    if (QFileInfo::exists(candidate)) return QDir::cleanPath(candidate);
  return {};
}

QString MainWindow::about_text() const {
  QString text = tr("<b>SNIP Workbench %1</b><br>FP8/FP4 mixed-precision Llama training on the CPU and the SNIP "
                    "planner (Pan et al., ASPLOS 2026).")
                     .arg(QStringLiteral(SNIP_VERSION));
  const QString readme = readme_path();
  if (!readme.isEmpty()) {
    const QString docs = QFileInfo(readme).absolutePath() + QStringLiteral("/docs");
    text += tr("<br><br>Documentation: <a href=\"%1\">README</a>")
                .arg(QUrl::fromLocalFile(readme).toString().toHtmlEscaped());
    if (QFileInfo(docs).isDir())
      text += tr(" · <a href=\"%1\">docs folder</a>").arg(QUrl::fromLocalFile(docs).toString().toHtmlEscaped());
    text += tr(" (F1 shows the README here)");
  }
  text += tr("<br><br>Database: %1")
              .arg(workbench_->store() ? workbench_->database_path().toHtmlEscaped() : tr("none open"));
  // The CPU and the kernel each precision runs on (the same lines as `snip info`).
  text += QStringLiteral("<br><br>") + QString::fromStdString(snip::isa_report())
                                           .toHtmlEscaped()
                                           .trimmed()
                                           .replace(QLatin1Char('\n'), QStringLiteral("<br>"));
  return text;
}

}  // namespace snip::ui
